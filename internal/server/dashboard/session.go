package dashboard

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
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
	Record *lifecycle.Record
	// Blocks are the conversation's window: its latest blocks, or those
	// before the chunk Earlier starts.
	Blocks []*block
	// Earlier, when not 0, is the page of the blocks before the window:
	// /sessions/ID?before=Earlier.
	Earlier int64
	// Follow, on the latest window, is where the page follows the session
	// (its /events, from the window); an earlier window does not.
	Follow   string
	Activity activityPart
	Card     recordPart
	Prompt   string // the prompt box's text, kept when it was not sent
	PlugLog  []plugLogRun
	Changes  bool // its plugs offer a diff: the page links its changes
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
	{"forked", "Forked: this is a new session, paused, made from its parent's environment, with its conversation forked. A prompt continues it."},
	{"fresh", "Forked: this is a new session, paused, made from its parent's environment; its conversation with the agent starts afresh, not as a fork of its parent's. A prompt continues it."},
}

// pageBytes bounds a page's window of a transcript: what the page shows
// and its server reads at once. Earlier windows are pages of their own.
const pageBytes = 1 << 20

// sessionDetail shows a session's record, what the dashboard's client
// does in it, and a window of its transcript, rendered as `sessions log`
// renders it: what the client received, redacted as it was. ?before=N
// shows the window that ends before the chunk numbered N.
func (d *sessionPages) sessionDetail(w http.ResponseWriter, r *http.Request, u user) {
	notice := ""
	for _, n := range pageNotices {
		if r.URL.Query().Get(n.query) != "" {
			notice = n.text
			break
		}
	}
	before := int64(0)
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			p := d.pageFor(u, "Bad request")
			p.Error = "?before= is the number of a transcript's chunk (a whole number above 0), not " + strconv.Quote(v) + "."
			d.render(w, http.StatusBadRequest, "error.html", p)
			return
		}
		before = n
	}
	d.sessionView(r.Context(), w, u, http.StatusOK, r.PathValue("id"), "", notice, "", before)
}

// sessionView renders a session's page with a problem or a notice, and
// the prompt box's text; its conversation is the window that ends before
// the chunk numbered before (0: the latest).
func (d *sessionPages) sessionView(ctx context.Context, w http.ResponseWriter, u user, status int, id, problem, notice, prompt string, before int64) {
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
	win, err := d.window(ctx, id, before)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	plugLog, err := d.Store.PlugLog(ctx, id)
	if err != nil {
		d.serverError(w, u, "reading the plug log", err)
		return
	}
	// Named as in the list: by its title, once it has one.
	p := d.pageFor(u, cmp.Or(rec.Title, "Session "+id))
	p.Error, p.Notice = problem, notice
	page := sessionPage{Record: rec, Blocks: withRuns(win.conv.conv.blocks, rec), Earlier: win.earlier(), Activity: d.activityPart(u, id), Card: recordPart{rec, csrfToken(u.token)}, Prompt: prompt, PlugLog: plugLogRuns(plugLog)}
	if before == 0 {
		page.Follow = fmt.Sprintf("/sessions/%s/events?from=%d&to=%d&run=%d&record=%d", url.PathEscape(id), win.after, win.to, win.run, rec.Updated.UnixNano())
	}
	_, page.Changes = actionOffered(ctx, d.Actions, id, "diff")
	p.Data = page
	d.render(w, status, "session.html", p)
}

// window is a window of a transcript rendered as a conversation: its
// chunks numbered after after up to to.
type window struct {
	after, to int64
	run       int // the run that wrote the chunk numbered after
	conv      *conversationFeeder
}

// earlier is the ?before= of the window before this one; 0: none.
func (w *window) earlier() int64 {
	if w.after == 0 {
		return 0
	}
	return w.after + 1
}

// window renders the window of a session's transcript that ends before
// the chunk numbered before (0: the latest).
func (d *sessionPages) window(ctx context.Context, id string, before int64) (*window, error) {
	to := before - 1
	if before == 0 {
		last, err := d.Store.TranscriptLast(ctx, id)
		if err != nil {
			return nil, err
		}
		to = last
	}
	after, run, err := d.Store.TranscriptWindow(ctx, id, to, pageBytes)
	if err != nil {
		return nil, err
	}
	return d.replay(ctx, id, after, to, run)
}

// replay renders a session's chunks numbered after after up to to, the
// first written in run, as a conversation.
func (d *sessionPages) replay(ctx context.Context, id string, after, to int64, run int) (*window, error) {
	rd, err := d.Store.TranscriptChunks(ctx, id, after, to)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	conv := newConversationFeeder(id)
	conv.conv.run = run
	if err := conv.readChunks(rd); err != nil {
		return nil, err
	}
	conv.add(nil)
	return &window{after: after, to: to, run: run, conv: conv}, nil
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

// withRuns gives the blocks of runs what the record keeps of them.
func withRuns(blocks []*block, rec *lifecycle.Record) []*block {
	for _, blk := range blocks {
		if blk.Kind == "run" {
			blk.Info = nil
			for i := range rec.History {
				if rec.History[i].Run == blk.Run {
					blk.Info = &rec.History[i]
				}
			}
		}
	}
	return blocks
}

// renderBlocks renders a conversation's blocks; a run's shows what the
// record keeps of it.
func (d *sessionPages) renderBlocks(blocks []*block, rec *lifecycle.Record) (template.HTML, error) {
	var b bytes.Buffer
	for _, blk := range withRuns(blocks, rec) {
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
		d.sessionView(r.Context(), w, u, http.StatusNotFound, id, "", "", "", 0)
		return
	}
	rd, err := d.Store.TranscriptChunks(r.Context(), id, 0, math.MaxInt64)
	if err != nil {
		d.serverError(w, u, "reading the transcript", err)
		return
	}
	defer rd.Close()
	out := bufio.NewWriterSize(w, 64<<10)
	defer out.Flush()
	if strings.HasSuffix(r.URL.Path, ".jsonl") {
		w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
		if _, err := io.Copy(out, rd); err != nil {
			d.log().Debug("dashboard: sending a transcript", "session", id, "err", err)
		}
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	text := newTextRenderer(out)
	if _, err := io.Copy(text, rd); err != nil {
		d.log().Debug("dashboard: sending a transcript", "session", id, "err", err)
	}
	text.end()
}
