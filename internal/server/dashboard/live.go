package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// followInterval is how often a followed transcript is read again: the
// store tells no one when a transcript grows.
const followInterval = 250 * time.Millisecond

// Events of a followed transcript; each carries rendered HTML as a JSON
// string.
const (
	// EventReset: the conversation so far, which replaces what the page
	// shows.
	EventReset = "reset"
	// EventAppend: blocks of the conversation added or changed; each
	// replaces the page's element of its id, or is added at the end.
	EventAppend  = "append"
	EventProblem = "problem" // the transcript cannot be read; the stream ends
	// EventActivity replaces the page's part that shows what the
	// dashboard's client does in the session: its prompt and the agent's
	// permission requests.
	EventActivity = "activity"
	// EventRecord replaces the page's part that shows the session's
	// record (state, runs, runner, times) when it changes.
	EventRecord = "record"
)

// follow streams a session's transcript, rendered as its page renders it,
// as server-sent events, until the browser leaves or the server stops:
// what is added after the page's window (?from=A&to=B&run=R: the window of
// chunks after A up to B, the first written in run R), or, without a
// window, the latest window as a reset and then what is added; and the
// session's activity each time it changes, and its record each time that
// changes. The transcript's events carry the number of the last chunk they
// render as their id: a browser that reconnects sends it back
// (Last-Event-ID) and the stream goes on after it, not from the page's
// window again. It holds the window's blocks that can still change, not
// the transcript.
func (d *sessionPages) follow(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	win, event, err := d.followStart(r, id)
	var bad badFollow
	if errors.As(err, &bad) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		send(w, rc, EventProblem, err.Error())
		return
	}
	conv, last := win.conv, win.to
	shown := 0  // the activity's version the page shows: none at first
	card := ""  // the record part the page was sent last: none at first
	lines := "" // the runs' lines as the page shows them: none sent yet
	// The version of the record the page was rendered with, and whether
	// the stream starts with the whole conversation instead.
	pageRecord, reset := r.URL.Query().Get("record"), event == EventReset
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		next, err := d.Store.TranscriptLast(r.Context(), id)
		if err == nil && next > last {
			conv, event, err = d.catchUp(r, conv, event, id, last, next)
			last = next
		}
		if err != nil {
			send(w, rc, EventProblem, err.Error())
			return
		}
		rec, err := d.Store.Session(r.Context(), id)
		if err != nil {
			send(w, rc, EventProblem, err.Error())
			return
		}
		changed := conv.add(nil)
		if len(changed) > 0 || event == EventReset {
			if event == EventReset {
				changed = conv.conv.blocks
			}
			html, err := d.renderBlocks(changed, rec)
			if err != nil {
				send(w, rc, EventProblem, err.Error())
				return
			}
			if err := sendAt(w, rc, event, last, string(html)); err != nil {
				return
			}
			event = EventAppend
			conv.conv.prune()
		}
		if v := d.client.snapshot(id).version; v != shown {
			html, err := d.renderActivity(u, id)
			if err != nil {
				send(w, rc, EventProblem, err.Error())
				return
			}
			if err := send(w, rc, EventActivity, html); err != nil {
				return
			}
			shown = v
		}
		html, err := d.renderRecord(u, rec)
		if err != nil {
			send(w, rc, EventProblem, err.Error())
			return
		}
		if html != card {
			if err := send(w, rc, EventRecord, html); err != nil {
				return
			}
		}
		card = html
		// The runs' lines show what the record keeps of them (a run's time
		// and pause, once it has ended).
		if runs := conv.conv.runs(); len(runs) > 0 {
			html, err := d.renderBlocks(runs, rec)
			if err != nil {
				send(w, rc, EventProblem, err.Error())
				return
			}
			// At first the page shows them as the record it was rendered
			// with had them (&record=), unless the stream starts with the
			// whole conversation (a reset).
			stale := !reset && pageRecord != "" && pageRecord != strconv.FormatInt(rec.Updated.UnixNano(), 10)
			if (lines != "" && string(html) != lines || lines == "" && stale) && send(w, rc, EventAppend, string(html)) != nil {
				return
			}
			lines = string(html)
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// catchUp renders a session's chunks numbered after after up to to into
// conv; when they are more than a page's window (a page left open while
// much was written), it renders the latest window instead, which replaces
// what the page shows.
func (d *sessionPages) catchUp(r *http.Request, conv *conversationFeeder, event, id string, after, to int64) (*conversationFeeder, string, error) {
	from, run, err := d.Store.TranscriptWindow(r.Context(), id, to, pageBytes)
	if err != nil {
		return conv, event, err
	}
	if from > after {
		win, err := d.replay(r.Context(), id, from, to, run)
		if err != nil {
			return conv, event, err
		}
		return win.conv, EventReset, nil
	}
	rd, err := d.Store.TranscriptChunks(r.Context(), id, after, to)
	if err != nil {
		return conv, event, err
	}
	defer rd.Close()
	return conv, event, conv.readChunks(rd)
}

// followWindow reads a page's window from /events' query.
func followWindow(q url.Values) (from, to, run int64, err error) {
	for _, p := range []struct {
		name string
		n    *int64
	}{{"from", &from}, {"to", &to}, {"run", &run}} {
		v := q.Get(p.name)
		if v == "" && p.name == "run" {
			continue
		}
		if *p.n, err = strconv.ParseInt(v, 10, 64); err != nil || *p.n < 0 {
			return 0, 0, 0, fmt.Errorf("?%s= is a transcript's chunk or run number (a whole number), not %q", p.name, v)
		}
	}
	if from > to {
		return 0, 0, 0, fmt.Errorf("?from=%d is after ?to=%d", from, to)
	}
	return from, to, run, nil
}

// badFollow is a stream's query or Last-Event-ID that cannot be read.
type badFollow struct{ error }

// followStart renders the window a stream goes on from, and names its
// first event: a reset of the latest window, or what is appended to the
// page's window (or to the last chunk a reconnecting browser was sent).
func (d *sessionPages) followStart(r *http.Request, id string) (*window, string, error) {
	q := r.URL.Query()
	var from, to, run int64
	var err error
	paged := q.Has("from") || q.Has("to")
	if paged {
		if from, to, run, err = followWindow(q); err != nil {
			return nil, "", badFollow{err}
		}
	}
	seen, resumed, err := lastEventID(r.Header, to)
	if err != nil {
		return nil, "", badFollow{err}
	}
	var win *window
	switch {
	case resumed:
		var last int64
		if last, err = d.Store.TranscriptLast(r.Context(), id); err == nil && seen > last {
			// Sent more than the transcript holds (a store restored from an
			// older backup): the latest window replaces what the page shows.
			win, err = d.window(r.Context(), id, 0)
			return win, EventReset, err
		}
		if err == nil {
			win, err = d.resume(r.Context(), id, seen, from, int(run))
		}
	case paged:
		win, err = d.replay(r.Context(), id, from, to, int(run))
	default:
		win, err = d.window(r.Context(), id, 0)
		return win, EventReset, err
	}
	if err != nil {
		return nil, "", err
	}
	win.conv.conv.changed() // the page shows them
	return win, EventAppend, nil
}

// lastEventID reads the Last-Event-ID of a browser that reconnects: the
// last chunk the stream rendered to it, at or after the page's window's
// end, to.
func lastEventID(h http.Header, to int64) (seen int64, ok bool, err error) {
	v := h.Get("Last-Event-ID")
	if v == "" {
		return 0, false, nil
	}
	if seen, err = strconv.ParseInt(v, 10, 64); err != nil || seen < to {
		return 0, false, fmt.Errorf("Last-Event-ID is the number of the last transcript chunk the stream sent (a whole number, at least the window's ?to=%d), not %q", to, v)
	}
	return seen, true, nil
}

// resume renders the window of a session's transcript that ends with the
// chunk numbered seen, which a browser that reconnects has already: a
// page's window's start (after A, the first written in run R) when that is
// the later one.
func (d *sessionPages) resume(ctx context.Context, id string, seen, after int64, run int) (*window, error) {
	from, fromRun, err := d.Store.TranscriptWindow(ctx, id, seen, pageBytes)
	if err != nil {
		return nil, err
	}
	if from > after {
		after, run = from, fromRun
	}
	return d.replay(ctx, id, after, seen, run)
}

// send writes one server-sent event and flushes it.
func send(w http.ResponseWriter, rc *http.ResponseController, event, text string) error {
	return sendAt(w, rc, event, 0, text)
}

// sendAt writes one server-sent event of the transcript whose chunks up to
// the one numbered chunk it renders (0: no id), and flushes it.
func sendAt(w http.ResponseWriter, rc *http.ResponseController, event string, chunk int64, text string) error {
	data, _ := json.Marshal(text)
	id := ""
	if chunk > 0 {
		id = "id: " + strconv.FormatInt(chunk, 10) + "\n"
	}
	if _, err := fmt.Fprintf(w, "%sevent: %s\ndata: %s\n\n", id, event, data); err != nil {
		return err
	}
	return rc.Flush()
}
