package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/blaiseagent/blaise-agent/sqlstore"
)

// lifetimes are the paused lifetimes the settings page offers (L1: 1 hour
// to 7 days), as many as the operator's maximum allows.
var lifetimes = []time.Duration{time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 72 * time.Hour, 7 * 24 * time.Hour}

var policies = []session.IdlePolicy{session.PolicyPause, session.PolicyEnd}

// agentForm is what the settings page shows.
type agentForm struct {
	Agent     *sqlstore.Agent
	Lifetimes []time.Duration
	Policies  []session.IdlePolicy
	Max       time.Duration
	Defaults  session.Settings
}

func (d *Dashboard) agents(w http.ResponseWriter, r *http.Request, u user) {
	as, err := d.Store.Agents()
	if err != nil {
		d.serverError(w, u, "listing agents", err)
		return
	}
	p := d.pageFor(u, "Agents")
	p.Data = as
	d.render(w, http.StatusOK, "agents.html", p)
}

func (d *Dashboard) agentPage(w http.ResponseWriter, u user, status int, a *sqlstore.Agent, problem, notice string) {
	max, err := blaise.MaxPausedLifetime()
	if err != nil {
		d.serverError(w, u, "the operator's maximum paused lifetime", err)
		return
	}
	p := d.pageFor(u, "Agent "+a.Name)
	p.Error, p.Notice = problem, notice
	p.Data = agentForm{Agent: a, Lifetimes: allowed(max), Policies: policies, Max: max, Defaults: session.Settings{
		InactivityLimit: session.DefaultInactivityLimit, Timeout: session.DefaultTimeout, PausedLifetime: session.DefaultPausedLifetime}}
	d.render(w, status, "agent.html", p)
}

func allowed(max time.Duration) []time.Duration {
	return slices.DeleteFunc(slices.Clone(lifetimes), func(d time.Duration) bool { return d > max })
}

func (d *Dashboard) agent(w http.ResponseWriter, r *http.Request, u user) {
	a, err := d.Store.Agent(r.PathValue("name"))
	if err != nil {
		d.serverError(w, u, "agent", err)
		return
	}
	notice := ""
	if r.URL.Query().Get("saved") != "" {
		notice = "Saved. New sessions get these settings; a runner's listen reads them at its next start."
	}
	d.agentPage(w, u, http.StatusOK, a, "", notice)
}

// saveAgent stores an agent's idle policy and paused lifetime, or, for a
// value not on offer, says why and changes nothing.
func (d *Dashboard) saveAgent(w http.ResponseWriter, r *http.Request, u user) {
	name := r.PathValue("name")
	a, err := d.Store.Agent(name)
	if err != nil {
		d.serverError(w, u, "agent", err)
		return
	}
	policy, lifetime, err := parseSettings(r.PostFormValue("idle_policy"), r.PostFormValue("paused_lifetime"))
	if err == nil {
		a, err = d.Store.UpdateAgent(name, func(a *sqlstore.Agent) error {
			a.Settings.IdlePolicy, a.Settings.PausedLifetime = policy, lifetime
			return nil
		})
	}
	if err != nil {
		d.agentPage(w, u, http.StatusBadRequest, a, "Not saved: "+err.Error(), "")
		return
	}
	d.log().Info("dashboard: agent settings changed", "agent", name, "user", u.Name, "idle_policy", policy, "paused_lifetime", lifetime)
	http.Redirect(w, r, "/agents/"+name+"?saved=1", http.StatusSeeOther)
}

// parseSettings checks the form's values against what the page offers.
func parseSettings(policy, lifetime string) (session.IdlePolicy, time.Duration, error) {
	p := session.IdlePolicy(policy)
	if !slices.Contains(policies, p) {
		return "", 0, fmt.Errorf("idle policy %q: choose %s or %s", policy, session.PolicyPause, session.PolicyEnd)
	}
	max, err := blaise.MaxPausedLifetime()
	if err != nil {
		return "", 0, err
	}
	ok := allowed(max)
	d, err := time.ParseDuration(lifetime)
	if err != nil || !slices.Contains(ok, d) {
		choices := make([]string, len(ok))
		for i, c := range ok {
			choices[i] = human(c)
		}
		return "", 0, fmt.Errorf("paused lifetime %q: choose one of %s (the operator's maximum is %s)", lifetime, strings.Join(choices, ", "), human(max))
	}
	return p, d, nil
}
