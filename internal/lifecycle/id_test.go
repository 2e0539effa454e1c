package lifecycle

import (
	"regexp"
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
