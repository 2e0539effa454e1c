package docs_test

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"
)

var (
	// A name that cites an issue (TestIssue12_…, run_issue11_….txtar)
	// says where the work came from, not what the test shows.
	issueNumber = regexp.MustCompile(`[Ii]ssue[0-9]`)
	goTestFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*)\(`)
)

// issueNamedTests returns, for one file of the repository, the tests it
// names after an issue: Go test functions (Test, Benchmark, Fuzz, Example)
// by name, testscripts and .blaisetest files by file name.
func issueNamedTests(rel, text string) []string {
	var bad []string
	switch {
	case strings.HasSuffix(rel, "_test.go"):
		for _, m := range goTestFunc.FindAllStringSubmatchIndex(text, -1) {
			if name := text[m[2]:m[3]]; issueNumber.MatchString(name) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", rel, strings.Count(text[:m[0]], "\n")+1, name))
			}
		}
	case strings.HasSuffix(rel, ".txtar") && strings.HasPrefix(rel, "testscripts/"),
		strings.HasSuffix(rel, ".blaisetest"):
		if issueNumber.MatchString(path.Base(rel)) {
			bad = append(bad, rel)
		}
	}
	return bad
}

// TestTestsAreNamedForWhatTheyShow: no test, testscript or .blaisetest file
// is named after an issue number; its name says what it shows, with the
// rule label where one applies (rules.md).
func TestTestsAreNamedForWhatTheyShow(t *testing.T) {
	repoFiles(t, func(rel, text string) {
		for _, b := range issueNamedTests(rel, text) {
			t.Errorf("%s is named after an issue number: name it for the behaviour it shows, with the rule label of docs/rules.md where one applies (TestL5_RunnerKilledMidTurnFailsAfterTheLease, run_c13_plugs_run_where_the_session_started.txtar)", b)
		}
	})
}

// TestNamesCarryingAnIssueNumberAreFound: the check above finds each kind of name it
// refuses, and passes names that only look alike.
func TestNamesCarryingAnIssueNumberAreFound(t *testing.T) {
	for _, c := range []struct {
		rel, text string
		bad       int
	}{
		{"x/a_test.go", "func TestIssue12_Reads(t *testing.T) {}\n", 1},
		{"x/a_test.go", "func BenchmarkIssue17_Lsp(b *testing.B) {}\nfunc FuzzIssue3(f *testing.F) {}\nfunc ExampleIssue4() {}\n", 3},
		{"x/a_test.go", "func TestL5_Reads_issue12(t *testing.T) {}\n", 1},
		{"testscripts/run_issue11_ending.txtar", "", 1},
		{"x/testdata/issue19-mkdtemp.blaisetest", "", 1},
		{"x/a_test.go", "// TestIssue12_Reads was its name.\nfunc TestReads(t *testing.T) {}\nfunc TestAnIssueIsReported(t *testing.T) {}\n", 0},
		{"x/a.go", "func TestIssue12_Reads(t *testing.T) {}\n", 0},
		{"testscripts/run_ending.txtar", "# issue12\n", 0},
	} {
		if got := issueNamedTests(c.rel, c.text); len(got) != c.bad {
			t.Errorf("%s %q: found %q, want %d names", c.rel, c.text, got, c.bad)
		}
	}
}
