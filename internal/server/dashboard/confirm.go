package dashboard

import "net/http"

// A destructive action (ending a session, resolving one, revoking a
// runner or a token) is confirmed on a page of its own before it is done:
// its form posts first without "confirmed", and gets this page, whose
// form posts again with it. It needs no script, and the strict CSP stays.

// confirmField is the form field that says a person confirmed the action.
const confirmField = "confirmed"

// confirmation is what the confirmation page shows.
type confirmation struct {
	Question string // names what is acted on: a session's title or id, a runner's name
	Detail   string // what the action does
	Action   string // the form's address
	Button   string
	Back     string            // where Cancel leads
	Keep     map[string]string // fields of the first form the confirmed one sends again
}

// confirmed reports whether the request confirms its action; if it does
// not, it shows the confirmation page instead.
func (d *site) confirmed(w http.ResponseWriter, r *http.Request, u user, c confirmation) bool {
	if r.PostFormValue(confirmField) == "yes" {
		return true
	}
	c.Action = r.URL.Path
	p := d.pageFor(u, "Confirm")
	p.Data = c
	d.render(w, http.StatusOK, "confirm.html", p)
	return false
}
