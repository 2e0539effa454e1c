package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// Forks fork sessions (docs/sessions.md#forks): a paused session's Fork
// button.
type Forks interface {
	Fork(ctx context.Context, id string) (*api.ForkJSON, error)
}

// forkPages fork a paused session, once confirmed, and go to the fork's
// page; what kept the fork from being made is said instead.
type forkPages struct {
	*site
	Forks Forks
}

// forkable: a session Fork applies to.
func forkable(r *lifecycle.Record) bool { return r.State == lifecycle.Paused }

func (d *forkPages) forkSession(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	rec, err := d.Store.Session(r.Context(), id)
	if errors.Is(err, lifecycle.ErrNotFound) {
		p := d.pageFor(u, "No such session")
		p.Error = "Session " + id + " does not exist. Nothing was made."
		d.render(w, http.StatusNotFound, "error.html", p)
		return
	}
	if err != nil {
		d.serverError(w, u, "reading the session", err)
		return
	}
	if forkable(rec) && !d.confirmed(w, r, u, confirmation{Question: "Fork session " + title(rec) + "?", Button: "Fork the session", Back: "/sessions/" + id,
		Detail: "A new session starts from this one's environment as it is now, on its runner: its plugs copy what they choose (blaise:worktree its branch, with the work not committed), and its conversation with the agent is forked where the agent can. This session stays paused, as it is."}) {
		return
	}
	if d.Forks == nil {
		p := d.pageFor(u, "Not forked")
		p.Error = "This server makes no forks. Nothing was made."
		d.render(w, http.StatusNotFound, "error.html", p)
		return
	}
	out, err := d.Forks.Fork(r.Context(), id)
	if err != nil {
		p := d.pageFor(u, "Not forked")
		p.Error = "Session " + id + " was not forked: " + err.Error()
		d.render(w, http.StatusConflict, "error.html", p)
		return
	}
	d.log().Info("dashboard: session forked", "session", id, "fork", out.Session.ID, "user", u.Name)
	q := url.Values{"forked": {id}}
	if out.Fresh != "" {
		q = url.Values{"fresh": {id}}
	}
	http.Redirect(w, r, "/sessions/"+url.PathEscape(out.Session.ID)+"?"+q.Encode(), http.StatusSeeOther)
}
