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
// Each is parsed as main parses it: with the command line of that command
// alone (commandLine), whose help is the whole command line's.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	type exited struct{}
	newParser := func(cli any) *kong.Kong {
		parser, err := kong.New(cli, append(options(), kong.Writers(&out, &out), kong.Exit(func(int) { panic(exited{}) }))...)
		if err != nil {
			t.Fatal(err)
		}
		return parser
	}
	parser := newParser(&CLI{})
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
				args := append(append([]string(nil), path...), "--help")
				cli, _ := commandLine(args)
				newParser(cli).Parse(args)
			}()
			testsupport.Golden(t, filepath.Join("testdata", "help", name+".txt"), out.Bytes())
		})
	}
}
