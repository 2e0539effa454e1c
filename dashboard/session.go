package dashboard

import (
	"errors"
	"net/http"

	"github.com/blaiseagent/blaise-agent/session"
)

// sessionPage is what a session's page shows.
type sessionPage struct {
	Record     *session.Record
	Transcript string
}

// sessionDetail shows a session's record and its transcript, rendered as
// `sessions log` renders it: what the client received, redacted as it
// was.
func (d *Dashboard) sessionDetail(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	rec, err := d.Store.Session(id)
	if errors.Is(err, session.ErrNotFound) {
		p := d.pageFor(u, "No such session")
		p.Error = "Session " + id + " does not exist."
		d.render(w, http.StatusNotFound, "error.html", p)
		return
	}
	if err != nil {
		d.serverError(w, u, "reading the session", err)
		return
	}
	text, err := d.transcript(id)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	p := d.pageFor(u, "Session "+id)
	p.Data = sessionPage{Record: rec, Transcript: text}
	d.render(w, http.StatusOK, "session.html", p)
}

// transcript renders a session's transcript as plain text.
func (d *Dashboard) transcript(id string) (string, error) {
	lines, _, err := d.Store.TranscriptAfter(id, 0)
	if err != nil {
		return "", err
	}
	r := newRenderer()
	return r.feed(lines) + r.end(), nil
}
