package dashboard

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/blaiseagent/blaise-agent/session"
)

// sessionPage is what a session's page shows.
type sessionPage struct {
	Record     *session.Record
	Transcript string
	Activity   activityPart
	Card       recordPart
	Prompt     string // the prompt box's text, kept when it was not sent
}

// recordPart is the part of a session's page that shows its record: sent
// alone, as it changes, to a page that follows the session.
type recordPart struct {
	Record *session.Record
	CSRF   string
}

// activityPart is the part of a session's page that shows what the
// dashboard's client does in it; it is also sent alone to a page that
// follows the session.
type activityPart struct {
	ID   string // the session's
	CSRF string
	activity
}

// pageNotices are the messages of a redirect to a session's page, by
// query parameter; the first one present is shown.
var pageNotices = []struct{ query, text string }{
	{"prompted", "Prompt sent: the agent's answer appears in the transcript as it streams."},
	{"answered", "Permission request answered."},
}

// sessionDetail shows a session's record, what the dashboard's client
// does in it, and its transcript, rendered as `sessions log` renders it:
// what the client received, redacted as it was.
func (d *Dashboard) sessionDetail(w http.ResponseWriter, r *http.Request, u user) {
	notice := ""
	for _, n := range pageNotices {
		if r.URL.Query().Get(n.query) != "" {
			notice = n.text
			break
		}
	}
	d.sessionView(w, u, http.StatusOK, r.PathValue("id"), "", notice, "")
}

// sessionView renders a session's page with a problem or a notice, and
// the prompt box's text.
func (d *Dashboard) sessionView(w http.ResponseWriter, u user, status int, id, problem, notice, prompt string) {
	rec, err := d.Store.Session(id)
	if errors.Is(err, session.ErrNotFound) {
		p := d.pageFor(u, "No such session")
		p.Error = "Session " + id + " does not exist."
		if problem != "" {
			p.Error += " Nothing was changed."
		}
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
	p.Error, p.Notice = problem, notice
	p.Data = sessionPage{Record: rec, Transcript: text, Activity: d.activityPart(u, id), Card: recordPart{rec, csrfToken(u.token)}, Prompt: prompt}
	d.render(w, status, "session.html", p)
}

func (d *Dashboard) activityPart(u user, id string) activityPart {
	return activityPart{ID: id, CSRF: csrfToken(u.token), activity: d.client.snapshot(id)}
}

// renderActivity renders the activity part of a session's page alone.
func (d *Dashboard) renderActivity(u user, id string) (string, error) {
	var b bytes.Buffer
	err := d.pages["session.html"].ExecuteTemplate(&b, "activity", d.activityPart(u, id))
	return b.String(), err
}

// renderRecord renders the record part of a session's page alone.
func (d *Dashboard) renderRecord(u user, id string) (string, error) {
	rec, err := d.Store.Session(id)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	err = d.pages["session.html"].ExecuteTemplate(&b, "record", recordPart{rec, csrfToken(u.token)})
	return b.String(), err
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
