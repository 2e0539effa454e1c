package dashboard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/blaiseagent/blaise-agent/client"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/blaiseagent/blaise-agent/sessionview"
)

// sessionPage is what a session's page shows.
type sessionPage struct {
	Record     *session.Record
	Transcript string
	Problems   string // lines of the transcript that could not be read
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
	text, problems, err := d.transcript(id)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	p := d.pageFor(u, "Session "+id)
	p.Data = sessionPage{Record: rec, Transcript: text, Problems: problems}
	d.render(w, http.StatusOK, "session.html", p)
}

// transcript renders a session's transcript as plain text.
func (d *Dashboard) transcript(id string) (text, problems string, err error) {
	rc, err := d.Store.ReadTranscript(id)
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	var out, errs bytes.Buffer
	term := &client.Terminal{Out: &out, Err: &errs}
	l := &sessionview.Log{Term: term, Err: &errs}
	br := bufio.NewReader(rc)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			l.Record(bytes.TrimSuffix(line, []byte("\n")))
		}
		if rerr != nil {
			break
		}
	}
	term.EndTurn("")
	if err := rc.Close(); err != nil {
		return "", "", fmt.Errorf("transcript: %w", err)
	}
	return out.String(), errs.String(), nil
}
