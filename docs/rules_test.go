package docs_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// A rule label is cited in prose as a word (C3, L5) and in a test's name
// as its first part after Test (TestL5_…) or a later one (…_M6_…).
var (
	citedName = regexp.MustCompile(`(?:Test|Fuzz|Benchmark|_)([CMHL][0-9]{1,2})_`)
	testFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
	defined   = regexp.MustCompile(`(?m)^\*\*([CMHL][0-9]{1,2})\*\* `)
	testsMark = regexp.MustCompile(`(?s)<!-- tests ([CMHL][0-9]{1,2}) -->\n.*?<!-- end -->`)
	// A section of a document the repository does not hold.
	section = regexp.MustCompile(`§ ?[0-9]`)
)

// repoFiles calls f with each source, script and document of the
// repository, by its path from the repository's root.
func repoFiles(t *testing.T, f func(rel, text string)) {
	t.Helper()
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "screenshots":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".txtar", ".md", ".star", ".blaisetest":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", p)
		f(filepath.ToSlash(rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The tests that name a rule: Go tests by function name, testscripts by
// file name (hosts_c6_hostd.txtar).
func testsOfRules(t *testing.T) map[string][]string {
	tests := map[string][]string{}
	repoFiles(t, func(rel, text string) {
		switch {
		case strings.HasSuffix(rel, "_test.go"):
			for _, m := range testFunc.FindAllStringSubmatch(text, -1) {
				for _, l := range citedName.FindAllStringSubmatch(m[1], -1) {
					tests[l[1]] = append(tests[l[1]], fmt.Sprintf("`%s` (%s)", m[1], filepath.ToSlash(filepath.Dir(rel))))
				}
			}
		case strings.HasPrefix(rel, "testscripts/") && strings.HasSuffix(rel, ".txtar"):
			name := strings.ToUpper(filepath.Base(rel))
			for _, l := range citedName.FindAllStringSubmatch(name, -1) {
				tests[l[1]] = append(tests[l[1]], fmt.Sprintf("`%s`", rel))
			}
		}
	})
	for l := range tests {
		slices.Sort(tests[l])
		tests[l] = slices.Compact(tests[l])
	}
	return tests
}

func TestRulesCitedAreDefinedInRulesMd(t *testing.T) {
	b, err := os.ReadFile("rules.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, m := range defined.FindAllStringSubmatch(string(b), -1) {
		rules[m[1]] = true
	}
	if len(rules) == 0 {
		t.Fatal("rules.md defines no rule (a rule starts a line as **C1** …)")
	}
	repoFiles(t, func(rel, text string) {
		for _, c := range citations(text) {
			if !rules[c.label] {
				t.Errorf("%s:%d: cites %s, which docs/rules.md does not define", rel, c.line, c.label)
			}
		}
		if m := section.FindStringIndex(text); m != nil {
			t.Errorf("%s:%d: cites a section (§) of a document the repository does not hold; cite docs/… or a rule of docs/rules.md", rel, strings.Count(text[:m[0]], "\n")+1)
		}
	})
}

// Every rule has a test that names it, and rules.md lists them.
func TestRulesListTheirTests(t *testing.T) {
	b, err := os.ReadFile("rules.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := testsOfRules(t)
	text := string(b)
	seen := map[string]bool{}
	got := testsMark.ReplaceAllStringFunc(text, func(block string) string {
		l := testsMark.FindStringSubmatch(block)[1]
		seen[l] = true
		if len(tests[l]) == 0 {
			t.Errorf("rule %s has no test that names it (a Go test Test%s_… or a testscript …_%s_….txtar)", l, l, strings.ToLower(l))
		}
		return fmt.Sprintf("<!-- tests %s -->\nTests: %s.\n<!-- end -->", l, strings.Join(tests[l], ", "))
	})
	for _, m := range defined.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			t.Errorf("rule %s has no <!-- tests %s --> list", m[1], m[1])
		}
	}
	testsupport.Golden(t, "rules.md", []byte(got))
}

type citation struct {
	label string
	line  int
}

// citations finds the rule labels text cites: C, M, H or L and one or two
// digits, as a word of their own (an underscore separates words) or after
// Test, Fuzz or Benchmark. A scan, not a regular expression: this reads
// the whole repository, and an expression without a literal to look for
// took seconds of it under -race.
func citations(text string) []citation {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	var out []citation
	line := 1
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\n':
			line++
			continue
		case c != 'C' && c != 'M' && c != 'H' && c != 'L':
			continue
		}
		if i > 0 && alnum(text[i-1]) && !strings.HasSuffix(text[:i], "Test") && !strings.HasSuffix(text[:i], "Fuzz") && !strings.HasSuffix(text[:i], "Benchmark") {
			continue
		}
		j := i + 1
		for j < len(text) && j-i <= 2 && digit(text[j]) {
			j++
		}
		if j == i+1 || (j < len(text) && alnum(text[j])) {
			continue
		}
		out = append(out, citation{text[i:j], line})
	}
	return out
}
