package session

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
)

// validID is what plug ids (and the store's session ids) may look like:
// they name files of persisted state, so they must be safe file names.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckID refuses an id that is not a safe file name; what says which kind
// of id it is ("plug id", "session id").
func CheckID(what, id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("invalid %s %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", what, id)
	}
	return nil
}

// NewID returns a fresh random id: 12 lowercase base32 characters (60
// bits), valid for CheckID.
func NewID() string {
	return strings.ToLower(rand.Text()[:12])
}
