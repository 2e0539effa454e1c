package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// lifetimes are the paused lifetimes the settings page offers (L1: 1 hour
// to 7 days), as many as the operator's maximum allows.
var lifetimes = []time.Duration{time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 72 * time.Hour, 7 * 24 * time.Hour}

var policies = []lifecycle.IdlePolicy{lifecycle.PolicyPause, lifecycle.PolicyEnd}

// agentForm is what the settings page shows.
type agentForm struct {
	Agent     *sqlstore.Agent
	Lifetimes []lifetime
	Policies  []lifecycle.IdlePolicy
	Max       time.Duration
	Defaults  lifecycle.Settings
}

// lifetime is a paused lifetime the page offers.
type lifetime struct {
	Value    time.Duration
	Label    string
	Selected bool
}

// agentPages serve the agents and their settings.
type agentPages struct {
	*site
}

func (d *agentPages) agents(w http.ResponseWriter, r *http.Request, u user) {
	as, err := d.Store.Agents(r.Context())
	if err != nil {
		d.serverError(w, u, "listing agents", err)
		return
	}
	p := d.pageFor(u, "Agents")
	p.Data = as
	d.render(w, http.StatusOK, "agents.html", p)
}

func (d *agentPages) agentPage(w http.ResponseWriter, u user, status int, a *sqlstore.Agent, problem, notice string) {
	max, err := lifecycle.MaxPausedLifetime()
	if err != nil {
		d.serverError(w, u, "the operator's maximum paused lifetime", err)
		return
	}
	p := d.pageFor(u, "Agent "+a.Name)
	p.Error, p.Notice = problem, notice
	var ls []lifetime
	for _, l := range offered(max, a.Settings.PausedLifetime) {
		label := human(l)
		if !slices.Contains(lifetimes, l) && l != max {
			label += " (set with agents set)"
		}
		if l > max {
			label += ", above the operator's maximum: sessions get " + human(max) + ", and a save stores it (L1)"
		}
		ls = append(ls, lifetime{Value: l, Label: label, Selected: l == a.Settings.PausedLifetime})
	}
	p.Data = agentForm{Agent: a, Lifetimes: ls, Policies: policies, Max: max, Defaults: lifecycle.Settings{
		InactivityLimit: lifecycle.DefaultInactivityLimit, Timeout: lifecycle.DefaultTimeout, PausedLifetime: lifecycle.DefaultPausedLifetime}}
	d.render(w, status, "agent.html", p)
}

// offered are the paused lifetimes the page offers: those of lifetimes
// up to the operator's maximum (the maximum itself when it is under all
// of them), and the stored one, whatever it is, so that the page shows it
// and a save keeps it.
func offered(max, stored time.Duration) []time.Duration {
	ls := slices.DeleteFunc(slices.Clone(lifetimes), func(d time.Duration) bool { return d > max })
	if len(ls) == 0 {
		ls = append(ls, max)
	}
	if !slices.Contains(ls, stored) {
		ls = append(ls, stored)
		slices.Sort(ls)
	}
	return ls
}

func (d *agentPages) agent(w http.ResponseWriter, r *http.Request, u user) {
	a, err := d.Store.Agent(r.Context(), r.PathValue("name"))
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

// saveAgent stores what the person changed of an agent's idle policy and
// paused lifetime, or, for a value not on offer, says why and changes
// nothing. A field left as the page showed it (its "was_" field) is not
// written: the stored value stays, even one changed meanwhile.
func (d *agentPages) saveAgent(w http.ResponseWriter, r *http.Request, u user) {
	name := r.PathValue("name")
	a, err := d.Store.Agent(r.Context(), name)
	if err != nil {
		d.serverError(w, u, "agent", err)
		return
	}
	touched := func(field string) bool {
		was, ok := r.PostForm["was_"+field]
		return !ok || len(was) != 1 || was[0] != r.PostFormValue(field)
	}
	// An untouched field is checked as what it is now.
	pv, lv := r.PostFormValue("idle_policy"), r.PostFormValue("paused_lifetime")
	if !touched("idle_policy") {
		pv = string(a.Settings.IdlePolicy)
	}
	if !touched("paused_lifetime") {
		lv = a.Settings.PausedLifetime.String()
	}
	policy, lifetime, err := parseSettings(pv, lv, a.Settings.PausedLifetime)
	if err == nil {
		a, err = d.Store.UpdateAgent(r.Context(), name, func(a *sqlstore.Agent) error {
			if touched("idle_policy") {
				a.Settings.IdlePolicy = policy
			}
			if touched("paused_lifetime") {
				a.Settings.PausedLifetime = lifetime
			}
			return nil
		})
	}
	if err != nil {
		d.agentPage(w, u, http.StatusBadRequest, a, "Not saved: "+err.Error(), "")
		return
	}
	d.log().Info("dashboard: agent settings saved", "agent", name, "user", u.Name, "idle_policy", a.Settings.IdlePolicy, "paused_lifetime", a.Settings.PausedLifetime)
	http.Redirect(w, r, "/agents/"+name+"?saved=1", http.StatusSeeOther)
}

// parseSettings checks the form's values against what the page offers.
func parseSettings(policy, lifetime string, stored time.Duration) (lifecycle.IdlePolicy, time.Duration, error) {
	p := lifecycle.IdlePolicy(policy)
	if !slices.Contains(policies, p) {
		return "", 0, fmt.Errorf("idle policy %q: choose %s or %s", policy, lifecycle.PolicyPause, lifecycle.PolicyEnd)
	}
	max, err := lifecycle.MaxPausedLifetime()
	if err != nil {
		return "", 0, err
	}
	ok := offered(max, stored)
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
