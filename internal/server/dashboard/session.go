package dashboard

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// sessionPages serve a session's page: its record and conversation, and
// the stream that keeps them current; its transcript; and the prompt box,
// cancel and permission answers, which the dashboard's ACP client sends.
type sessionPages struct {
	*site
	client  *acpClient
	Actions Actions // for the link to the session's changes
}

// sessionPage is what a session's page shows.
type sessionPage struct {
	Record       *lifecycle.Record
	Conversation template.HTML
	Activity     activityPart
	Card         recordPart
	Prompt       string // the prompt box's text, kept when it was not sent
	Changes      bool   // its plugs offer a diff: the page links its changes
}

// recordPart is the part of a session's page that shows its record: sent
// alone, as it changes, to a page that follows the session.
type recordPart struct {
	Record *lifecycle.Record
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
	{"prompted", "Prompt sent: the agent's answer appears in the conversation as it streams."},
	{"answered", "Permission request answered."},
	{"cancelled", "Cancel sent: the agent stops its turn, which ends as cancelled."},
}

// sessionDetail shows a session's record, what the dashboard's client
// does in it, and its transcript, rendered as `sessions log` renders it:
// what the client received, redacted as it was.
func (d *sessionPages) sessionDetail(w http.ResponseWriter, r *http.Request, u user) {
	notice := ""
	for _, n := range pageNotices {
		if r.URL.Query().Get(n.query) != "" {
			notice = n.text
			break
		}
	}
	d.sessionView(r.Context(), w, u, http.StatusOK, r.PathValue("id"), "", notice, "")
}

// sessionView renders a session's page with a problem or a notice, and
// the prompt box's text.
func (d *sessionPages) sessionView(ctx context.Context, w http.ResponseWriter, u user, status int, id, problem, notice, prompt string) {
	rec, err := d.Store.Session(ctx, id)
	if errors.Is(err, lifecycle.ErrNotFound) {
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
	lines, _, err := d.Store.TranscriptAfter(ctx, id, 0)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	conv, err := d.renderBlocks(newConversationFeeder().add(lines), rec)
	if err != nil {
		d.serverError(w, u, "rendering the transcript", err)
		return
	}
	p := d.pageFor(u, "Session "+id)
	p.Error, p.Notice = problem, notice
	sp := sessionPage{Record: rec, Conversation: conv, Activity: d.activityPart(u, id), Card: recordPart{rec, csrfToken(u.token)}, Prompt: prompt}
	_, sp.Changes = actionOffered(ctx, d.Actions, id, "diff")
	p.Data = sp
	d.render(w, status, "session.html", p)
}

func (d *sessionPages) activityPart(u user, id string) activityPart {
	return activityPart{ID: id, CSRF: csrfToken(u.token), activity: d.client.snapshot(id)}
}

// renderActivity renders the activity part of a session's page alone.
func (d *sessionPages) renderActivity(u user, id string) (string, error) {
	var b bytes.Buffer
	err := d.pages["session.html"].ExecuteTemplate(&b, "activity", d.activityPart(u, id))
	return b.String(), err
}

// renderRecord renders the record part of a session's page alone.
func (d *sessionPages) renderRecord(u user, rec *lifecycle.Record) (string, error) {
	var b bytes.Buffer
	err := d.pages["session.html"].ExecuteTemplate(&b, "record", recordPart{rec, csrfToken(u.token)})
	return b.String(), err
}

// renderBlocks renders a conversation's blocks; a run's shows what the
// record keeps of it.
func (d *sessionPages) renderBlocks(blocks []*block, rec *lifecycle.Record) (template.HTML, error) {
	var b bytes.Buffer
	for _, blk := range blocks {
		if blk.Kind == "run" {
			blk.Info = nil
			for i := range rec.History {
				if rec.History[i].Run == blk.Run {
					blk.Info = &rec.History[i]
				}
			}
		}
		if err := d.pages["session.html"].ExecuteTemplate(&b, "block", blk); err != nil {
			return "", err
		}
	}
	return template.HTML(b.String()), nil
}

// transcript serves a session's transcript: as `sessions log` renders it,
// or, as transcript.jsonl, its records as the store keeps them (redacted
// as they were written), to download.
func (d *sessionPages) transcript(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	if _, err := d.Store.Session(r.Context(), id); err != nil {
		d.sessionView(r.Context(), w, u, http.StatusNotFound, id, "", "", "")
		return
	}
	lines, _, err := d.Store.TranscriptAfter(r.Context(), id, 0)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	if strings.HasSuffix(r.URL.Path, ".jsonl") {
		w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
		w.Write(lines)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(newTextRenderer().text(lines)))
}
