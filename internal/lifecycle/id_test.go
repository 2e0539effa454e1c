package lifecycle

import (
	"regexp"
	"strings"
	"testing"
)

// Session ids are 12 lowercase base32 characters: short enough to type,
// valid file names (CheckID).
func TestNewID(t *testing.T) {
	form := regexp.MustCompile(`^[a-z2-7]{12}$`)
	for range 100 {
		if id := NewID(); !form.MatchString(id) || CheckID("session id", id) != nil {
			t.Fatalf("NewID() = %q", id)
		}
	}
}

// TestCheckNameTakesLowercaseLettersDigitsAndDashes: a name of an agent,
// user or runner is 1 to 63 lowercase letters, digits or '-', not starting
// with '-'.
func TestCheckNameTakesLowercaseLettersDigitsAndDashes(t *testing.T) {
	for _, ok := range []string{"a", "demo", "r1", "0-x", strings.Repeat("a", 63)} {
		if err := CheckName("agent", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "A", "a_b", "a b", "é", strings.Repeat("a", 64)} {
		if err := CheckName("agent", bad); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}
