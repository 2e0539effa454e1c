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

// validName reports whether name is what the names of agents, users and
// runners may look like (they appear in URLs and commands): checked by
// hand, as a regexp compiled at start would cost every process its init.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 63 || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// CheckName refuses a name that is not 1 to 63 lowercase letters, digits
// or '-', starting with a letter or digit; what says what it names.
func CheckName(what, name string) error {
	if !validName(name) {
		return fmt.Errorf("invalid %s name %q: want 1 to 63 lowercase letters, digits or '-', starting with a letter or digit", what, name)
	}
	return nil
}
