package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/blaiseagent/blaise-agent/sqlstore"
)

// LiveRunner is a runner connected now.
type LiveRunner struct {
	Agent   string
	Version string // its blaise-agent's
	Runs    int    // live runs
}

// Runners tell which runners are connected, by name, and cut a runner's
// connection.
type Runners interface {
	LiveRunners() map[string]LiveRunner
	// Disconnect ends the connections of the runner with the id.
	Disconnect(id string)
}

// tokenLifetimes are the lifetimes a registration token may be minted with.
var tokenLifetimes = []time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// runnerRow is a registered runner and its connection, if any.
type runnerRow struct {
	*sqlstore.Runner
	Live *LiveRunner
}

// runnerList is what the runners page shows; Minted is set only on the
// answer to a mint: the token is shown then, once.
type runnerList struct {
	Runners   []runnerRow
	Lifetimes []time.Duration
	Minted    *sqlstore.Registration
}

func (d *Dashboard) runnersPage(w http.ResponseWriter, r *http.Request, u user, status int, minted *sqlstore.Registration, problem string) {
	rs, err := d.Store.Runners()
	if err != nil {
		d.serverError(w, u, "listing runners", err)
		return
	}
	live := d.Runners.LiveRunners()
	l := runnerList{Lifetimes: tokenLifetimes, Minted: minted}
	for _, rn := range rs {
		row := runnerRow{Runner: rn}
		if lr, ok := live[rn.Name]; ok {
			row.Live = &lr
		}
		l.Runners = append(l.Runners, row)
	}
	p := d.pageFor(u, "Runners")
	p.Error, p.Data = problem, l
	if id := r.URL.Query().Get("revoked"); id != "" {
		p.Notice = "Runner " + id + " revoked: its connection is cut, and it cannot connect again."
	}
	d.render(w, status, "runners.html", p)
}

func (d *Dashboard) runners(w http.ResponseWriter, r *http.Request, u user) {
	d.runnersPage(w, r, u, http.StatusOK, nil, "")
}

// mintRegistration mints a registration token and shows it, once.
func (d *Dashboard) mintRegistration(w http.ResponseWriter, r *http.Request, u user) {
	ttl, err := time.ParseDuration(r.PostFormValue("ttl"))
	if err != nil || !slices.Contains(tokenLifetimes, ttl) {
		d.runnersPage(w, r, u, http.StatusBadRequest, nil, "No token minted: lifetime "+r.PostFormValue("ttl")+" is not one of 1 hour, 1 day or 7 days.")
		return
	}
	reg, err := d.Store.MintRegistration(ttl)
	if err != nil {
		d.serverError(w, u, "minting a registration token", err)
		return
	}
	d.log().Info("dashboard: registration token minted", "id", reg.ID, "user", u.Name, "expires", reg.Expires)
	d.runnersPage(w, r, u, http.StatusOK, reg, "")
}

func (d *Dashboard) revokeRunner(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	// The store takes a second revocation as none; the page of a person
	// who revokes twice (a stale page) says so.
	rs, err := d.Store.Runners()
	if err != nil {
		d.serverError(w, u, "listing runners", err)
		return
	}
	if i := slices.IndexFunc(rs, func(rn *sqlstore.Runner) bool { return rn.ID == id && !rn.Revoked.IsZero() }); i >= 0 {
		d.runnersPage(w, r, u, http.StatusConflict, nil, fmt.Sprintf("Nothing was changed: runner %s (%s) was revoked already, at %s.", rs[i].Name, id, when(rs[i].Revoked)))
		return
	}
	if err := d.Store.RevokeRunner(id); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, sqlstore.ErrNotFound) {
			status = http.StatusNotFound
		}
		d.runnersPage(w, r, u, status, nil, "Nothing was revoked: "+err.Error())
		return
	}
	// Revoked, it is cut off now: its reconnection is refused.
	d.Runners.Disconnect(id)
	d.log().Info("dashboard: runner revoked", "id", id, "user", u.Name)
	http.Redirect(w, r, "/runners?"+url.Values{"revoked": {id}}.Encode(), http.StatusSeeOther)
}
