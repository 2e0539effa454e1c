package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestIssue16_HelpOfEveryCommand (issue 16, item 8): the --help of every
// command is kept in testdata/help/ (BLAISE_UPDATE_GOLDEN=1 rewrites the
// files), so a change of a flag or its text shows in review beside the docs
// it must agree with.
func TestIssue16_HelpOfEveryCommand(t *testing.T) {
	var out bytes.Buffer
	type exited struct{}
	parser, err := kong.New(&CLI{}, append(options(), kong.Writers(&out, &out), kong.Exit(func(int) { panic(exited{}) }))...)
	if err != nil {
		t.Fatal(err)
	}
	var paths [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		paths = append(paths, path)
		for _, c := range n.Children {
			if !c.Hidden {
				walk(c, append(append([]string(nil), path...), c.Name))
			}
		}
	}
	walk(parser.Model.Node, nil)
	if len(paths) < 19 {
		t.Fatalf("found %d commands, want every one", len(paths))
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"blaise-agent"}, path...), "_")
		t.Run(name, func(t *testing.T) {
			out.Reset()
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(exited); !ok {
							panic(r)
						}
					}
				}()
				parser.Parse(append(append([]string(nil), path...), "--help"))
			}()
			golden(t, filepath.Join("testdata", "help", name+".txt"), out.Bytes())
		})
	}
}

// golden compares got with the file golden (BLAISE_UPDATE_GOLDEN=1 rewrites
// it).
func golden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if os.Getenv("BLAISE_UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}
