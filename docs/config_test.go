package docs_test

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
)

// namesRow is a row of config.md's table of what each file sees: its
// names, and what each kind of file gets of them ("yes", "no", or "call
// fails").
type namesRow struct {
	line      int
	names     []string
	universe  bool // Starlark's built-ins: the names are examples
	sees      map[string]string
	firstCell string
}

// namesTable reads the table that follows the marker line in config.md.
func namesTable(t *testing.T) (kinds []string, rows []namesRow) {
	t.Helper()
	doc, err := os.ReadFile("config.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- names table: checked by docs/config_test.go -->"
	lines := strings.Split(string(doc), "\n")
	at := slices.Index(lines, marker)
	if at < 0 {
		t.Fatalf("config.md lacks the line %q before its table of names", marker)
	}
	cells := func(line string) []string {
		parts := strings.Split(strings.Trim(line, "| "), " | ")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	head := cells(lines[at+1])
	kinds = head[1:]
	code := regexp.MustCompile("`([^`]+)`")
	link := regexp.MustCompile(`\(\[[^\]]*\]\([^)]*\)\)`)
	for n := at + 3; n < len(lines) && strings.HasPrefix(lines[n], "|"); n++ {
		c := cells(lines[n])
		if len(c) != len(head) {
			t.Fatalf("config.md:%d: %d cells, want %d", n+1, len(c), len(head))
		}
		// The names are the code spans outside the links "([text](url))".
		r := namesRow{line: n + 1, universe: strings.HasPrefix(c[0], "Starlark's built-ins"), sees: map[string]string{}, firstCell: c[0]}
		for _, m := range code.FindAllStringSubmatch(link.ReplaceAllString(c[0], ""), -1) {
			r.names = append(r.names, m[1])
		}
		for i, k := range kinds {
			r.sees[k] = c[i+1]
		}
		rows = append(rows, r)
	}
	return kinds, rows
}

// probe is a set of files in which file refers to $NAME; it loads with
// the configuration blaise.star.
type probe struct {
	what  string
	kind  string // the column of the table
	file  string
	files map[string]string
}

const probeAgent = "agent(command = \"x\")\n"

var probes = []probe{
	{"the configuration", "configuration", "blaise.star", map[string]string{
		"blaise.star": probeAgent + "_probe = $NAME\n",
	}},
	{"a plug file", "plug file", "p.star", map[string]string{
		"blaise.star": probeAgent + "setup(use(\"./p.star\"))\n",
		"p.star":      "plug(name = \"p\")\n_probe = $NAME\n",
	}},
	{"a module loaded by the configuration", "module", "m.star", map[string]string{
		"blaise.star": probeAgent + "load(\"./m.star\", \"v\")\n",
		"m.star":      "_probe = $NAME\nv = 1\n",
	}},
	{"a module loaded by a plug", "module", "m.star", map[string]string{
		"blaise.star": probeAgent + "setup(use(\"./p.star\"))\n",
		"p.star":      "load(\"./m.star\", \"v\")\nplug(name = \"p\")\n",
		"m.star":      "_probe = $NAME\nv = 1\n",
	}},
	{"a module loaded by a module", "module", "m.star", map[string]string{
		"blaise.star": probeAgent + "load(\"./n.star\", \"w\")\n",
		"n.star":      "load(\"./m.star\", \"v\")\nw = v\n",
		"m.star":      "_probe = $NAME\nv = 1\n",
	}},
}

// loadProbe writes p's files with $NAME replaced by expr and loads its
// configuration with the loader every command uses.
func loadProbe(t *testing.T, p probe, expr string) error {
	t.Helper()
	dir := t.TempDir()
	for name, text := range p.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(text, "$NAME", expr)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := chain.NewLoader(log.New(io.Discard)).LoadConfig(filepath.Join(dir, "blaise.star"))
	return err
}

// TestConfigNamesTable: config.md's table of what each file sees holds
// every name the loader predeclares, and says for each kind of file
// (a module loaded by each kind of file) whether the name is defined
// there, and where a name's call fails: each is tried.
func TestConfigNamesTable(t *testing.T) {
	kinds, rows := namesTable(t)
	if want := []string{"configuration", "plug file", "module"}; !slices.Equal(kinds, want) {
		t.Fatalf("the table's columns are %q, want %q", kinds, want)
	}
	predeclared := chain.NewLoader(log.New(io.Discard)).FilePredeclared()
	var listed []string
	for _, r := range rows {
		if len(r.names) == 0 {
			t.Errorf("config.md:%d: no names in %q", r.line, r.firstCell)
		}
		for _, name := range r.names {
			// A name the loader predeclares over a built-in (type) has
			// a row of its own.
			if _, ok := starlark.Universe[name]; ok != r.universe && predeclared[name] == nil {
				t.Errorf("config.md:%d: %s is one of Starlark's built-ins: %v; the row says %v", r.line, name, ok, r.universe)
			}
			if !r.universe {
				listed = append(listed, name)
			}
		}
	}
	var want []string
	for name := range predeclared {
		want = append(want, name)
	}
	want = append(want, interp.ConfigNames...)
	slices.Sort(want)
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("the table lists %q; the loader predeclares %q", listed, want)
	}

	for _, r := range rows {
		calls := slices.Contains(slices.Collect(maps.Values(r.sees)), "call fails")
		for _, name := range r.names {
			for _, p := range probes {
				sees := r.sees[p.kind]
				err := loadProbe(t, p, name)
				undefined := err != nil && strings.Contains(err.Error(), p.file+":") && strings.Contains(err.Error(), "undefined: "+name)
				switch {
				case sees == "no" && !undefined:
					t.Errorf("config.md:%d: %s in %s: the table says no, the loader says %v", r.line, name, p.what, err)
				case sees != "no" && err != nil:
					t.Errorf("config.md:%d: %s in %s: the table says %s, the loader says %v", r.line, name, p.what, sees, err)
				case sees != "yes" && sees != "no" && sees != "call fails":
					t.Errorf("config.md:%d: %s in %s: %q, want yes, no or call fails", r.line, name, p.what, sees)
				}
				if calls && sees != "no" {
					err := loadProbe(t, p, name+"(name = \"q\")")
					if fails := err != nil && strings.Contains(err.Error(), "plug() may only be called in a plug file"); fails != (sees == "call fails") {
						t.Errorf("config.md:%d: calling %s in %s: the table says %s, the loader says %v", r.line, name, p.what, sees, err)
					}
				}
			}
		}
	}
}
