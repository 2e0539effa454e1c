package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

var states = []lifecycle.State{lifecycle.Active, lifecycle.Paused, lifecycle.TearingDown, lifecycle.Ended, lifecycle.Orphaned}

// The sessions list's page sizes. The server's API has its own: the
// server imports this package, not the other way.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// sessionList is what the sessions page shows: a page of the list, read
// from the store's indexes, and the links that keep its filters.
type sessionList struct {
	Sessions []*lifecycle.Record
	Agents   []*sqlstore.Agent
	States   []lifecycle.State
	Agent    string
	State    lifecycle.State
	Q        string // the title's text searched
	Oldest   bool
	Limit    int // 0: the default
	Cursor   string
	// Next is the link of the page after this one, "" on the last;
	// First the first page's; Sort the first page's in the other order;
	// Rows, on the first page of the newest, what the page's script
	// fetches to refresh it.
	Next, First, Sort, Rows string
	// Rendered is the list as the page shows it, and Version its
	// digest: the page's script replaces it when the list changes.
	Rendered template.HTML
	Version  string
	// Now is when the list was read: its times are said relative to it.
	Now time.Time
	// Asking: the sessions of the page with a permission request of the
	// dashboard's client waiting for a person.
	Asking map[string]bool
}

// Filtered: the list does not show every session.
func (l sessionList) Filtered() bool { return l.Agent != "" || l.State != "" || l.Q != "" }

// query is the list's filters and order, with the cursor given.
func (l sessionList) query(cursor string) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"agent": l.Agent, "state": string(l.State), "q": l.Q, "cursor": cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if l.Oldest {
		v.Set("order", "oldest")
	}
	if l.Limit != 0 {
		v.Set("limit", strconv.Itoa(l.Limit))
	}
	return v
}

// link is path with the query v.
func link(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
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
	client   *acpClient // whose permission requests wait for a person
}

// list reads the page of the list that r asks for; what it could not
// take (an unknown state, a stale cursor) is said in p.Error.
func (d *sessionListPages) list(r *http.Request, p *page) (sessionList, error) {
	q := r.URL.Query()
	l := sessionList{Agent: q.Get("agent"), State: lifecycle.State(q.Get("state")), Q: strings.TrimSpace(q.Get("q")), Cursor: q.Get("cursor"), States: states, Now: time.Now()}
	var wrong []string
	if l.State != "" && !slices.Contains(states, l.State) {
		wrong = append(wrong, "Unknown state "+string(l.State)+": showing every state.")
		l.State = ""
	}
	switch o := q.Get("order"); o {
	case "", "newest":
	case "oldest":
		l.Oldest = true
	default:
		wrong = append(wrong, "Unknown order "+o+": showing the newest first.")
	}
	limit := defaultListLimit
	if s := q.Get("limit"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 1 || n > maxListLimit {
			wrong = append(wrong, fmt.Sprintf("Page size %q: want a number from 1 to %d; showing %d.", s, maxListLimit, defaultListLimit))
		} else {
			limit, l.Limit = n, n
		}
	}
	lq := sqlstore.ListQuery{Agent: l.Agent, State: string(l.State), Text: l.Q, Oldest: l.Oldest, Limit: limit, After: l.Cursor}
	pg, err := d.Store.ListSessions(r.Context(), lq)
	if errors.Is(err, sqlstore.ErrCursor) {
		wrong = append(wrong, "That page link is not one of this list: showing the first page.")
		l.Cursor, lq.After = "", ""
		pg, err = d.Store.ListSessions(r.Context(), lq)
	}
	if broken := (*lifecycle.BrokenError)(nil); errors.As(err, &broken) {
		d.log().Warn("dashboard: listing sessions", "err", err) // the others are listed
		wrong = append(wrong, "Some sessions cannot be read, and are not listed: "+err.Error())
	} else if err != nil {
		return l, err
	}
	p.Error = strings.Join(wrong, " ")
	l.Sessions = pg.Sessions
	for _, rec := range l.Sessions {
		if d.client.asking(rec.ID) {
			if l.Asking == nil {
				l.Asking = map[string]bool{}
			}
			l.Asking[rec.ID] = true
		}
	}
	if pg.Next != "" {
		l.Next = link("/sessions", l.query(pg.Next))
	}
	l.First = link("/sessions", l.query(""))
	if l.Cursor == "" && !l.Oldest {
		l.Rows = link("/sessions/rows", l.query(""))
	}
	other := l
	other.Oldest = !l.Oldest
	l.Sort = link("/sessions", other.query(""))
	return l, nil
}

func (d *sessionListPages) sessions(w http.ResponseWriter, r *http.Request, u user) {
	p := d.pageFor(u, "Sessions")
	l, err := d.list(r, &p)
	if err != nil {
		d.serverError(w, u, "listing sessions", err)
		return
	}
	if l.Agents, err = d.Store.Agents(r.Context()); err != nil {
		d.serverError(w, u, "listing agents", err)
		return
	}
	q := r.URL.Query()
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
	if l.Rendered, l.Version, err = d.part("sessions.html", "list", p); err != nil {
		d.serverError(w, u, "listing sessions", err)
		return
	}
	p.Data = l
	d.render(w, http.StatusOK, "sessions.html", p)
}

// rows renders the list alone, as the sessions page shows it: what the
// page's script fetches to refresh its first page. Its ETag is the list's
// version: unchanged, it is not sent again (304).
func (d *sessionListPages) rows(w http.ResponseWriter, r *http.Request, u user) {
	p := d.pageFor(u, "Sessions")
	l, err := d.list(r, &p)
	var html template.HTML
	var version string
	if err == nil {
		p.Data = l
		html, version, err = d.part("sessions.html", "list", p)
	}
	if err != nil {
		d.log().Error("dashboard: listing sessions", "err", err)
		http.Error(w, "listing sessions: "+err.Error(), http.StatusInternalServerError)
		return
	}
	etag := `"` + version + `"`
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, string(html))
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

// title names a session in a question: its title, when it has one, and
// its id.
func title(rec *lifecycle.Record) string {
	if rec.Title == "" {
		return rec.ID
	}
	return "“" + rec.Title + "” (" + rec.ID + ")"
}
