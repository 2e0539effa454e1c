// Package docs_test checks the examples of the user documentation.
//
// Every ```python block of a doc whose first line is "# file: NAME" is a
// complete file. NAME is "example-N/PATH": the blocks of one doc with the
// same example-N directory form one example, which is written to a
// temporary directory; its example-N/blaise.star must then load, with every
// plug it uses and every module they load. Every file of an example must be
// reached from its blaise.star, so that no example goes unchecked. Blocks
// without a "# file:" line are fragments and are not checked.
package docs_test

import (
	"bufio"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/charmbracelet/log"
)

// docs are the documents whose examples are checked.
var docs = []string{"plugs.md", "config.md", "hosts.md", "stdlib.md"}

// A block is a complete file given in a doc.
type block struct {
	line int    // line of the "# file:" comment in the doc
	name string // the path after "# file:", such as example-1/blaise.star
	text string // the block, "# file:" line included
}

var exampleDir = regexp.MustCompile(`^example-[0-9]+$`)

// blocks returns the checked blocks of the doc, in order.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []block
		in    bool     // inside a ```python block
		lines []string // of the current block
		start int      // line of the current block's first line
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```python":
			in, lines, start = true, nil, n+1
		case in && strings.TrimSpace(line) == "```":
			in = false
			if len(lines) == 0 {
				continue
			}
			name, ok := strings.CutPrefix(lines[0], "# file:")
			if !ok {
				continue // a fragment
			}
			out = append(out, block{line: start, name: strings.TrimSpace(name), text: strings.Join(lines, "\n") + "\n"})
		case in:
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if in {
		t.Fatalf("%s: a ```python block is not closed", doc)
	}
	return out
}

// loadRef finds the modules a file loads.
var loadRef = regexp.MustCompile(`(?m)^\s*load\(\s*"([^"]+)"`)

func TestExamplesLoad(t *testing.T) {
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			groups := exampleGroups(t, doc, exampleDir, "example-N/PATH")
			for _, g := range writeExamples(t, groups) {
				t.Run(g, func(t *testing.T) { checkExample(t, doc, g, groups[g]) })
			}
		})
	}
}

// writeExamples writes the examples' files into a temporary directory,
// makes it the working directory (positions in errors are relative to it),
// and returns the examples' names in order.
func writeExamples(t *testing.T, groups map[string][]block) []string {
	t.Helper()
	dir := t.TempDir()
	names := make([]string, 0, len(groups))
	for g, files := range groups {
		names = append(names, g)
		for _, b := range files {
			p := filepath.Join(dir, filepath.FromSlash(b.name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sort.Strings(names)
	t.Chdir(dir)
	return names
}

// exampleGroups returns the complete files of doc by example: by the first
// element of their names, which must match dirRE (shape names it for
// errors). A file given twice is an error.
func exampleGroups(t *testing.T, doc string, dirRE *regexp.Regexp, shape string) map[string][]block {
	t.Helper()
	bs := blocks(t, doc)
	if len(bs) == 0 {
		t.Fatalf("%s has no checked examples (blocks starting with # file:)", doc)
	}
	groups := map[string][]block{}
	seen := map[string]int{}
	for _, b := range bs {
		clean := path.Clean(b.name)
		group, _, ok := strings.Cut(clean, "/")
		if clean != b.name || !ok || !dirRE.MatchString(group) {
			t.Errorf("%s:%d: file name %q: want %s", doc, b.line, b.name, shape)
			continue
		}
		if first, dup := seen[b.name]; dup {
			t.Errorf("%s:%d: file %s is also given at line %d", doc, b.line, b.name, first)
			continue
		}
		seen[b.name] = b.line
		groups[group] = append(groups[group], b)
	}
	return groups
}

// checkExample loads the example's blaise.star and checks that it reaches
// every file of the example.
func checkExample(t *testing.T, doc, group string, files []block) {
	config := group + "/blaise.star"
	if _, ok := findBlock(files, config); !ok {
		t.Fatalf("%s: example %s has no %s", doc, group, config)
	}
	cfg, err := chain.LoadConfig(filepath.FromSlash(config), log.New(io.Discard))
	if err != nil {
		b, _ := findBlock(files, config)
		t.Fatalf("%s:%d: %s does not load:\n%v", doc, b.line, config, err)
	}
	reached := map[string]bool{config: true}
	for _, u := range cfg.Uses {
		reached[filepath.ToSlash(u.Plug.File)] = true
	}
	for _, b := range files {
		for _, m := range loadRef.FindAllStringSubmatch(b.text, -1) {
			reached[path.Join(path.Dir(b.name), m[1])] = true
		}
	}
	for _, b := range files {
		if !reached[b.name] {
			t.Errorf("%s:%d: %s is neither used nor loaded by %s, so it is not checked", doc, b.line, b.name, config)
		}
	}
}

func findBlock(files []block, name string) (block, bool) {
	for _, b := range files {
		if b.name == name {
			return b, true
		}
	}
	return block{}, false
}
