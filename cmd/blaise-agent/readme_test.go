package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEveryPackage: the README's layout section has a line
// for every top-level directory that holds Go code, so a new package cannot
// be added without saying what it owns.
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
		if path, _, ok := strings.Cut(line, "/ "); ok {
			top, _, _ := strings.Cut(path, "/")
			named[top] = true
		}
	}
	dirs, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		goFiles, _ := filepath.Glob(filepath.Join("../..", d.Name(), "*", "*.go"))
		own, _ := filepath.Glob(filepath.Join("../..", d.Name(), "*.go"))
		if len(goFiles)+len(own) == 0 {
			continue
		}
		if !named[d.Name()] {
			t.Errorf("README.md's layout has no line for %s/", d.Name())
		}
	}
}
