package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
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
	// Sessions are the active sessions whose run it holds.
	Sessions []string
}

// runnerList is what the runners page shows. Minted is set once, on the
// page a mint redirects to: the token is shown then, and never again.
type runnerList struct {
	Runners       []runnerRow
	Registrations []*sqlstore.Registration // unused and unexpired
	APITokens     []*sqlstore.APIToken
	Lifetimes     []time.Duration
	Agents        []*sqlstore.Agent
	Minted        *minted
	ShownAlready  bool // the mint's page was shown before: the token is gone
}

// minted is a registration token just minted, with the listen command
// that uses it: this server's address and the agent chosen at the mint.
type minted struct {
	*sqlstore.Registration
	user   string
	Server string
	Agent  string
}

// mintShownFor bounds how long a minted token waits for the page its mint
// redirects to.
const mintShownFor = 10 * time.Minute

// mints hold minted tokens between a mint and the page it redirects to
// (POST, redirect, GET): the page takes its token, so a reload shows it no
// more and mints nothing.
type mints struct {
	mu sync.Mutex
	m  map[string]*minted // by the redirect's nonce
}

func (ms *mints) put(m *minted) string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]*minted{}
	}
	for k, v := range ms.m {
		if time.Since(v.Created) > mintShownFor {
			delete(ms.m, k)
		}
	}
	nonce := lifecycle.NewID()
	ms.m[nonce] = m
	return nonce
}

// take returns the token a mint of user left under nonce, once.
func (ms *mints) take(nonce, user string) *minted {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	m := ms.m[nonce]
	if m == nil || m.user != user || time.Since(m.Created) > mintShownFor {
		return nil
	}
	delete(ms.m, nonce)
	return m
}

// runnerPages serve the runners and the tokens: minting registration
// tokens, revoking runners and tokens.
type runnerPages struct {
	*site
	Runners Runners
	mints   mints
}

func (d *runnerPages) runnersPage(w http.ResponseWriter, r *http.Request, u user, status int, problem string) {
	rs, err := d.Store.Runners(r.Context())
	if err != nil {
		d.serverError(w, u, "listing runners", err)
		return
	}
	regs, apiTokens, err := d.tokens(r.Context())
	if err != nil {
		d.serverError(w, u, "listing tokens", err)
		return
	}
	l := runnerList{Lifetimes: tokenLifetimes, APITokens: apiTokens}
	if l.Agents, err = d.Store.Agents(r.Context()); err != nil {
		d.serverError(w, u, "listing agents", err)
		return
	}
	now := time.Now()
	for _, reg := range regs {
		if reg.Used.IsZero() && now.Before(reg.Expires) {
			l.Registrations = append(l.Registrations, reg)
		}
	}
	live := d.Runners.LiveRunners()
	sessions, err := d.Store.Sessions(r.Context())
	if err != nil {
		d.serverError(w, u, "listing sessions", err)
		return
	}
	for _, rn := range rs {
		row := runnerRow{Runner: rn}
		if lr, ok := live[rn.Name]; ok {
			row.Live = &lr
		}
		for _, s := range sessions {
			if s.Runner == rn.Name && s.State == lifecycle.Active {
				row.Sessions = append(row.Sessions, s.ID)
			}
		}
		l.Runners = append(l.Runners, row)
	}
	p := d.pageFor(u, "Runners")
	if nonce := r.URL.Query().Get("minted"); nonce != "" && status == http.StatusOK {
		l.Minted = d.mints.take(nonce, u.Name)
		l.ShownAlready = l.Minted == nil
	}
	p.Error, p.Data = problem, l
	if id := r.URL.Query().Get("revoked"); id != "" {
		p.Notice = "Runner " + id + " revoked: its connection is cut, and it cannot connect again."
	}
	if id := r.URL.Query().Get("revoked_token"); id != "" {
		p.Notice = "Token " + id + " revoked: it is refused from now on."
	}
	d.render(w, status, "runners.html", p)
}

func (d *runnerPages) runners(w http.ResponseWriter, r *http.Request, u user) {
	d.runnersPage(w, r, u, http.StatusOK, "")
}

// mintRegistration mints a registration token and redirects to the page
// that shows it, once.
func (d *runnerPages) mintRegistration(w http.ResponseWriter, r *http.Request, u user) {
	ttl, err := time.ParseDuration(r.PostFormValue("ttl"))
	if err != nil || !slices.Contains(tokenLifetimes, ttl) {
		d.runnersPage(w, r, u, http.StatusBadRequest, "No token minted: lifetime "+r.PostFormValue("ttl")+" is not one of 1 hour, 1 day or 7 days.")
		return
	}
	agent := r.PostFormValue("agent")
	if agent != "" {
		if _, err := d.Store.Agent(r.Context(), agent); err != nil {
			d.runnersPage(w, r, u, http.StatusBadRequest, "No token minted: "+err.Error())
			return
		}
	}
	reg, err := d.Store.MintRegistration(r.Context(), ttl)
	if err != nil {
		d.serverError(w, u, "minting a registration token", err)
		return
	}
	d.log().Info("dashboard: registration token minted", "id", reg.ID, "user", u.Name, "expires", reg.Expires)
	nonce := d.mints.put(&minted{Registration: reg, user: u.Name, Server: serverURL(r), Agent: agent})
	http.Redirect(w, r, "/runners?"+url.Values{"minted": {nonce}}.Encode()+"#minted-title", http.StatusSeeOther)
}

// serverURL is this server's address as the browser reached it.
func serverURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// tokens are the registration tokens and the API tokens.
func (d *runnerPages) tokens(ctx context.Context) ([]*sqlstore.Registration, []*sqlstore.APIToken, error) {
	regs, err := d.Store.Registrations(ctx)
	if err != nil {
		return nil, nil, err
	}
	toks, err := d.Store.APITokens(ctx)
	return regs, toks, err
}

// revokeToken revokes an unused registration token or an API token, after
// confirmation.
func (d *runnerPages) revokeToken(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	regs, toks, err := d.tokens(r.Context())
	if err != nil {
		d.serverError(w, u, "listing tokens", err)
		return
	}
	var c confirmation
	var revoke func(context.Context, string) error
	if i := slices.IndexFunc(regs, func(t *sqlstore.Registration) bool { return t.ID == id }); i >= 0 {
		c = confirmation{Question: "Revoke registration token " + id + "?", Detail: "No runner can register with it any more."}
		revoke = d.Store.RevokeRegistration
		if !regs[i].Used.IsZero() || !time.Now().Before(regs[i].Expires) {
			d.runnersPage(w, r, u, http.StatusConflict, "Nothing was changed: registration token "+id+" is used or expired already.")
			return
		}
	} else if i := slices.IndexFunc(toks, func(t *sqlstore.APIToken) bool { return t.ID == id }); i >= 0 {
		c = confirmation{Question: fmt.Sprintf("Revoke API token %s (%s)?", toks[i].Name, id), Detail: "Clients that use it are refused from now on."}
		revoke = d.Store.RevokeAPIToken
		if !toks[i].Revoked.IsZero() {
			d.runnersPage(w, r, u, http.StatusConflict, fmt.Sprintf("Nothing was changed: API token %s (%s) was revoked already, at %s.", toks[i].Name, id, when(toks[i].Revoked)))
			return
		}
	} else {
		d.runnersPage(w, r, u, http.StatusNotFound, "Nothing was revoked: no registration token and no API token has id "+id+".")
		return
	}
	c.Button, c.Back = "Revoke the token", "/runners"
	if !d.confirmed(w, r, u, c) {
		return
	}
	if err := revoke(r.Context(), id); err != nil {
		d.serverError(w, u, "revoking a token", err)
		return
	}
	d.log().Info("dashboard: token revoked", "id", id, "user", u.Name)
	http.Redirect(w, r, "/runners?"+url.Values{"revoked_token": {id}}.Encode(), http.StatusSeeOther)
}

func (d *runnerPages) revokeRunner(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	// The store takes a second revocation as none; the page of a person
	// who revokes twice (a stale page) says so.
	rs, err := d.Store.Runners(r.Context())
	if err != nil {
		d.serverError(w, u, "listing runners", err)
		return
	}
	if i := slices.IndexFunc(rs, func(rn *sqlstore.Runner) bool { return rn.ID == id && !rn.Revoked.IsZero() }); i >= 0 {
		d.runnersPage(w, r, u, http.StatusConflict, fmt.Sprintf("Nothing was changed: runner %s (%s) was revoked already, at %s.", rs[i].Name, id, when(rs[i].Revoked)))
		return
	}
	if i := slices.IndexFunc(rs, func(rn *sqlstore.Runner) bool { return rn.ID == id }); i >= 0 && !d.confirmed(w, r, u, confirmation{
		Question: fmt.Sprintf("Revoke runner %s (%s)?", rs[i].Name, id), Button: "Revoke the runner", Back: "/runners",
		Detail: "Its connection is cut, its runs stop, and it cannot connect again: it must register anew with a new token.",
	}) {
		return
	}
	if err := d.Store.RevokeRunner(r.Context(), id); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, sqlstore.ErrNotFound) {
			status = http.StatusNotFound
		}
		d.runnersPage(w, r, u, status, "Nothing was revoked: "+err.Error())
		return
	}
	// Revoked, it is cut off now: its reconnection is refused.
	d.Runners.Disconnect(id)
	d.log().Info("dashboard: runner revoked", "id", id, "user", u.Name)
	http.Redirect(w, r, "/runners?"+url.Values{"revoked": {id}}.Encode(), http.StatusSeeOther)
}
