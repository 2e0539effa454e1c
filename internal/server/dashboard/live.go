package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
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
// as server-sent events: the whole of it, then what is added, until the
// browser leaves or the server stops; and the session's activity each
// time it changes, and its record each time that changes.
func (d *sessionPages) follow(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	conv := newConversationFeeder()
	var last int64
	shown := 0 // the activity's version the page shows: none at first
	card := "" // the record part the page was sent last: none at first
	event := EventReset
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		lines, next, err := d.Store.TranscriptAfter(r.Context(), id, last)
		if err != nil {
			send(w, rc, EventProblem, err.Error())
			return
		}
		last = next
		rec, err := d.Store.Session(r.Context(), id)
		if err != nil {
			send(w, rc, EventProblem, err.Error())
			return
		}
		changed := conv.add(lines)
		if len(changed) > 0 || event == EventReset {
			if event == EventReset {
				changed = conv.conv.blocks
			}
			html, err := d.renderBlocks(changed, rec)
			if err != nil {
				send(w, rc, EventProblem, err.Error())
				return
			}
			if err := send(w, rc, event, string(html)); err != nil {
				return
			}
			event = EventAppend
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
			// The runs' lines show what the record keeps of them.
			if runs := conv.conv.runs(); card != "" && len(runs) > 0 {
				html, err := d.renderBlocks(runs, rec)
				if err != nil || send(w, rc, EventAppend, string(html)) != nil {
					return
				}
			}
		}
		card = html
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// send writes one server-sent event and flushes it.
func send(w http.ResponseWriter, rc *http.ResponseController, event, text string) error {
	data, _ := json.Marshal(text)
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return rc.Flush()
}
