package safename

import (
	"regexp"
	"strings"
	"testing"
)

// The rule as it was first written, as a regular expression.
var rule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func TestValidIsTheRuleOfSafeNames(t *testing.T) {
	for _, s := range []string{"", "a", "A.b_c-d", ".a", "-a", "_a", "a/b", "..", "a b", "é", "a\x00",
		strings.Repeat("x", 128), strings.Repeat("x", 129), "1", "a..b"} {
		if got, want := Valid(s), rule.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidIsTheRuleOfSafeNames(f *testing.F) {
	f.Add("a.b")
	f.Add("../x")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), rule.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	})
}
