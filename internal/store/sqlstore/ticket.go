package sqlstore

import (
	"encoding/base64"
	"strconv"
)

// RunTicket is what the session process of a run shows to have its store
// served on connections of its own (runner protocol 7): sealed with the
// store key and bound to the session and the run, so that it opens for
// that run only, and still does after the server restarted.
func (s *Store) RunTicket(session string, run int) string {
	return base64.RawURLEncoding.EncodeToString(s.box.Seal(session, ticketFor(run), nil))
}

// RunTicketValid reports whether ticket is one of RunTicket(session, run).
func (s *Store) RunTicketValid(session string, run int, ticket string) bool {
	sealed, err := base64.RawURLEncoding.DecodeString(ticket)
	if err != nil {
		return false
	}
	plain, err := s.box.Open(session, ticketFor(run), sealed)
	return err == nil && len(plain) == 0
}

// ticketFor is what a run's ticket is bound to besides its session: no
// plug id holds a NUL, so no sealed plug state is a ticket.
func ticketFor(run int) string { return "\x00run-store\x00" + strconv.Itoa(run) }
