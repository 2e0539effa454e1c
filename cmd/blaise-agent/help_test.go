package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestHelpOfEveryCommand: the --help of every command is kept in
// testdata/help/ (BLAISE_UPDATE_GOLDEN=1 rewrites the files), so a change of
// a flag or its text shows in review beside the docs it must agree with.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
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
			testsupport.Golden(t, filepath.Join("testdata", "help", name+".txt"), out.Bytes())
		})
	}
}
