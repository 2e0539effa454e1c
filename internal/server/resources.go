package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
)

// resources are the HTTP API's agents and sessions, and the engine's
// actions on sessions as the API and the dashboard take them.
type resources struct {
	Store   *sqlstore.Store
	Log     *log.Logger
	engine  *engine.Engine
	metrics *serverMetrics
}

func agentJSON(a *sqlstore.Agent) api.AgentJSON {
	return api.AgentJSON{
		Name: a.Name, Config: a.Config, IdlePolicy: string(a.Settings.IdlePolicy),
		PausedLifetime: a.Settings.PausedLifetime.String(), InactivityLimit: a.Settings.InactivityLimit.String(), Timeout: a.Settings.Timeout.String(),
		TeardownBackoff: a.Settings.TeardownBackoff.String(), TeardownAttempts: a.Settings.TeardownAttempts,
		Created: a.Created.UTC().Format(time.RFC3339), Updated: a.Updated.UTC().Format(time.RFC3339),
	}
}

// applyAgent lays the fields j sets over a, naming a field that does not
// parse.
func applyAgent(j api.AgentJSON, a *sqlstore.Agent) error {
	if j.Config != "" {
		a.Config = j.Config
	}
	if j.IdlePolicy != "" {
		a.Settings.IdlePolicy = lifecycle.IdlePolicy(j.IdlePolicy)
	}
	if j.TeardownAttempts != 0 {
		a.Settings.TeardownAttempts = j.TeardownAttempts
	}
	for _, f := range []struct {
		name string
		in   string
		out  *time.Duration
	}{{"paused_lifetime", j.PausedLifetime, &a.Settings.PausedLifetime}, {"inactivity_limit", j.InactivityLimit, &a.Settings.InactivityLimit}, {"timeout", j.Timeout, &a.Settings.Timeout}, {"teardown_backoff", j.TeardownBackoff, &a.Settings.TeardownBackoff}} {
		if f.in == "" {
			continue
		}
		d, err := time.ParseDuration(f.in)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (want e.g. 30m or 24h)", f.name, f.in)
		}
		*f.out = d
	}
	return nil
}

func (res *resources) listAgents(w http.ResponseWriter, r *http.Request) {
	as, err := res.Store.Agents(r.Context())
	if err != nil {
		failErr(w, err)
		return
	}
	out := []api.AgentJSON{}
	for _, a := range as {
		out = append(out, agentJSON(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (res *resources) createAgent(w http.ResponseWriter, r *http.Request) {
	var j api.AgentJSON
	if !readJSON(w, r, &j) {
		return
	}
	a := sqlstore.Agent{Name: j.Name}
	if err := applyAgent(j, &a); err != nil {
		failErr(w, err)
		return
	}
	created, err := res.Store.CreateAgent(r.Context(), a)
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, agentJSON(created))
}

func (res *resources) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := res.Store.Agent(r.Context(), r.PathValue("name"))
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, agentJSON(a))
}

func (res *resources) updateAgent(w http.ResponseWriter, r *http.Request) {
	var j api.AgentJSON
	if !readJSON(w, r, &j) {
		return
	}
	if j.Name != "" && j.Name != r.PathValue("name") {
		fail(w, http.StatusBadRequest, "name: an agent cannot be renamed")
		return
	}
	a, err := res.Store.UpdateAgent(r.Context(), r.PathValue("name"), func(a *sqlstore.Agent) error { return applyAgent(j, a) })
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, agentJSON(a))
}

func (res *resources) deleteAgent(w http.ResponseWriter, r *http.Request) {
	if err := res.Store.DeleteAgent(r.Context(), r.PathValue("name")); err != nil {
		failErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listSessions answers a page of the sessions list, newest first, filtered
// in the database (sqlstore.ListSessions).
func (res *resources) listSessions(w http.ResponseWriter, r *http.Request) {
	q, err := listQuery(r)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	page, err := res.Store.ListSessions(r.Context(), q)
	if broken := (*lifecycle.BrokenError)(nil); errors.As(err, &broken) {
		res.Log.Warn("listing sessions", "err", err) // the others are listed
	} else if err != nil {
		failErr(w, err)
		return
	}
	if page.Next != "" {
		w.Header().Set(api.HeaderNextCursor, page.Next)
	}
	if page.Sessions == nil {
		page.Sessions = []*lifecycle.Record{} // [], not null
	}
	writeJSON(w, http.StatusOK, page.Sessions)
}

// listQuery reads the sessions list's parameters.
func listQuery(r *http.Request) (sqlstore.ListQuery, error) {
	v := r.URL.Query()
	q := sqlstore.ListQuery{Agent: v.Get("agent"), State: v.Get("state"), Runner: v.Get("runner"), Text: v.Get("q"), After: v.Get("cursor"), Limit: api.DefaultListLimit}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > api.MaxListLimit {
			return q, fmt.Errorf("limit %q: want a number from 1 to %d", l, api.MaxListLimit)
		}
		q.Limit = n
	}
	if q.State != "" && !slices.Contains(lifecycle.States, lifecycle.State(q.State)) {
		return q, fmt.Errorf("state %q: want one of %v", q.State, lifecycle.States)
	}
	// mine: the sessions opened with an API token of the caller's name.
	if v.Get("mine") == "true" {
		name := owner(r)
		q.Owner = &name
	}
	return q, nil
}

func (res *resources) getSession(w http.ResponseWriter, r *http.Request) {
	rec, err := res.Store.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// patchSession sets the title a person gives a session; derived titles
// leave it from then on.
func (res *resources) patchSession(w http.ResponseWriter, r *http.Request) {
	var p api.SessionPatchJSON
	if !readJSON(w, r, &p) {
		return
	}
	rec, err := lifecycle.SetTitle(r.Context(), res.Store, r.PathValue("id"), p.Title)
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// getTranscript streams a session's transcript (serveTranscript).
func (res *resources) getTranscript(w http.ResponseWriter, r *http.Request) {
	serveTranscript(w, r, res.Store, res.Log)
}

// endSession ends a session: a live run gets a closed stop, recorded
// before it is sent (L3); a paused one a teardown run. A session whose run
// no runner receives is an error, and nothing changes.
func (res *resources) endSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := res.EndSession(r.Context(), id)
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (res *resources) resolveSession(w http.ResponseWriter, r *http.Request) {
	rec, err := res.ResolveSession(r.Context(), r.PathValue("id"))
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// EndSession ends a session (POST /v1/sessions/ID/end, the dashboard's
// End): a live run gets a closed stop, recorded before it is sent (L3); a
// paused one a teardown run, as does a live one that paused on an earlier
// stop. A session whose run no runner receives is an error, and nothing
// changes.
func (res *resources) EndSession(ctx context.Context, id string) (*lifecycle.Record, error) {
	if _, err := res.Store.Session(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if l := res.engine.Running(id); l != nil {
		if err := l.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil {
			res.metrics.stops.Inc("refused")
			return nil, err
		}
		res.metrics.stops.Inc("sent")
		rec, err := l.Wait(ctx)
		// A stop sent before ours (idle, when its client left) pauses the
		// run; the session is ended all the same.
		if err != nil || rec.State != lifecycle.Paused {
			return rec, err
		}
	}
	return res.engine.End(ctx, id)
}

// ResolveSession ends an orphaned session once a person has cleaned up
// after it (L2).
func (res *resources) ResolveSession(ctx context.Context, id string) (*lifecycle.Record, error) {
	return res.engine.Resolve(ctx, id)
}
