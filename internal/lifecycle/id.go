package lifecycle

import (
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/support/safename"
)

// CheckID refuses an id that is not a safe file name; what says which kind
// of id it is ("plug id", "session id").
func CheckID(what, id string) error {
	if !safename.Valid(id) {
		return fmt.Errorf("invalid %s %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", what, id)
	}
	return nil
}

// NewID returns a fresh random id: 12 lowercase base32 characters (60
// bits), valid for CheckID.
func NewID() string {
	return strings.ToLower(rand.Text()[:12])
}
