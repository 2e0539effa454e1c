package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

var states = []lifecycle.State{lifecycle.Active, lifecycle.Paused, lifecycle.TearingDown, lifecycle.Ended, lifecycle.Orphaned}

// sessionList is what the sessions page shows.
type sessionList struct {
	Sessions []*lifecycle.Record
	Agents   []*sqlstore.Agent
	States   []lifecycle.State
	Agent    string
	State    lifecycle.State
}

// notices are the messages of a redirect after an action, by its query.
var notices = map[string]string{
	"ended":    "Session %s ended.",
	"resolved": "Session %s resolved: it is ended.",
}

// sessionListPages serve the sessions' list and the actions on a session
// that return to it: End and Resolve.
type sessionListPages struct {
	*site
	Sessions Sessions
}

func (d *sessionListPages) sessions(w http.ResponseWriter, r *http.Request, u user) {
	q := r.URL.Query()
	l := sessionList{Agent: q.Get("agent"), State: lifecycle.State(q.Get("state")), States: states}
	p := d.pageFor(u, "Sessions")
	if l.State != "" && !slices.Contains(states, l.State) {
		p.Error = "Unknown state " + string(l.State) + ": showing every state."
		l.State = ""
	}
	recs, err := d.Store.Sessions(r.Context())
	if err != nil {
		d.serverError(w, u, "listing sessions", err)
		return
	}
	if l.Agents, err = d.Store.Agents(r.Context()); err != nil {
		d.serverError(w, u, "listing agents", err)
		return
	}
	for _, rec := range slices.Backward(recs) { // newest first
		if (l.Agent == "" || rec.AgentName == l.Agent) && (l.State == "" || rec.State == l.State) {
			l.Sessions = append(l.Sessions, rec)
		}
	}
	for action, text := range notices {
		if id := q.Get(action); id != "" {
			p.Notice = fmt.Sprintf(text, id)
			// What the action left, if it is not over: a failed teardown.
			if rec, err := d.Store.Session(r.Context(), id); err == nil && rec.State != lifecycle.Ended {
				p.Notice = fmt.Sprintf("Session %s is %s.", id, rec.State)
				if why := rec.Unsettled(); why != nil {
					p.Notice = fmt.Sprintf("Session %s is %s: %v", id, rec.State, why)
				}
			}
		}
	}
	p.Data = l
	d.render(w, http.StatusOK, "sessions.html", p)
}

// action runs an engine action on a session and goes back to the list,
// or shows what went wrong: nothing changed then. A session the action
// applies to (its state allows it) is asked for confirmation first.
func (d *sessionListPages) action(w http.ResponseWriter, r *http.Request, u user, name string, applies func(*lifecycle.Record) bool,
	ask func(*lifecycle.Record) confirmation, do func(id string) (*lifecycle.Record, error)) {
	id := r.PathValue("id")
	if rec, err := d.Store.Session(r.Context(), id); err == nil && applies(rec) {
		c := ask(rec)
		c.Back = "/sessions/" + id
		if !d.confirmed(w, r, u, c) {
			return
		}
	}
	if _, err := do(id); err != nil {
		p := d.pageFor(u, "Not done")
		p.Error = "Nothing was changed: " + err.Error()
		status := http.StatusConflict
		if errors.Is(err, lifecycle.ErrNotFound) {
			p.Error = "Session " + id + " does not exist: nothing was changed."
			status = http.StatusNotFound
		}
		d.render(w, status, "error.html", p)
		return
	}
	d.log().Info("dashboard: session "+name, "session", id, "user", u.Name)
	http.Redirect(w, r, "/sessions?"+url.Values{name: {id}}.Encode(), http.StatusSeeOther)
}

func (d *sessionListPages) endSession(w http.ResponseWriter, r *http.Request, u user) {
	d.action(w, r, u, "ended", endable, func(rec *lifecycle.Record) confirmation {
		return confirmation{Question: "End session " + title(rec) + "?", Button: "End the session",
			Detail: "A live run stops, a paused session is torn down: its plugs clean up what they prepared. An ended session cannot be resumed."}
	}, func(id string) (*lifecycle.Record, error) { return d.Sessions.EndSession(r.Context(), id) })
}

func (d *sessionListPages) resolveSession(w http.ResponseWriter, r *http.Request, u user) {
	d.action(w, r, u, "resolved", orphaned, func(rec *lifecycle.Record) confirmation {
		return confirmation{Question: "Resolve session " + title(rec) + "?", Button: "Resolve: I cleaned up",
			Detail: "It is marked ended and its stored state is deleted; nothing cleans up after it any more. What its teardown left: " + rec.Teardown.LastError}
	}, func(id string) (*lifecycle.Record, error) { return d.Sessions.ResolveSession(r.Context(), id) })
}

// title names a session in a question: its id (sessions have no title
// yet).
func title(rec *lifecycle.Record) string { return rec.ID }
