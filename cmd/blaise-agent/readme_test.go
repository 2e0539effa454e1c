package main

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryPackage: the README's layout section has a line
// for every top-level directory that holds Go code and for every group under
// internal/, so a new package cannot be added without saying what it owns;
// internal/ holds at most ten groups, so the tree stays readable at a glance.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)## Layout\n+```\n(.*?)```").FindSubmatch(readme)
	if section == nil {
		t.Fatal("README.md has no ## Layout section with a code block")
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(section[1]), "\n") {
		prefix := ""
		if strings.HasPrefix(line, "  ") {
			prefix = "internal/"
		}
		name, _, _ := strings.Cut(strings.TrimSpace(line), "/")
		if name != "" {
			named[prefix+name] = true
		}
	}
	check := func(parent string) (groups int) {
		dirs, err := os.ReadDir(filepath.Join("../..", parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if !d.IsDir() || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				continue
			}
			dir := filepath.Join("../..", parent, d.Name())
			own, _ := filepath.Glob(filepath.Join(dir, "*.go"))
			below, _ := filepath.Glob(filepath.Join(dir, "*", "*.go"))
			deeper, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.go"))
			if len(own)+len(below)+len(deeper) == 0 {
				continue
			}
			groups++
			if !named[path.Join(parent, d.Name())] {
				t.Errorf("README.md's layout has no line for %s/", path.Join(parent, d.Name()))
			}
		}
		return groups
	}
	check("")
	if n := check("internal"); n > 10 {
		t.Errorf("internal/ holds %d groups; at most ten keep the layout readable", n)
	}
}
