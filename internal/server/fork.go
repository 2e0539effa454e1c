package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
)

// forks fork the sessions of the server (POST /v1/sessions/ID/fork, the
// dashboard's Fork), as `sessions fork` does a local one: the engine makes
// the fork, whose start run goes to the runner of the session forked,
// where its environment is (Launch).
type forks struct {
	runners   *runners
	resources *resources
}

func (f forks) fork(w http.ResponseWriter, r *http.Request) {
	// No body: the server's read timeout would cancel the request of a
	// fork that lasts longer.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	out, err := f.Fork(r.Context(), r.PathValue("id"))
	if errors.As(err, new(*engine.FailedForkError)) {
		// Not the request's fault: the fork failed where it was made.
		fail(w, http.StatusBadGateway, "%v", err)
		return
	}
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// Fork forks the paused session id (engine.Fork, whose rules are those of
// a local fork): a fork that fails is undone, and nothing is left of it
// but, should its teardown fail too, a record that says so. A session
// whose runner is not connected, or speaks a protocol before forks, is
// refused before anything is made.
func (f forks) Fork(ctx context.Context, id string) (*api.ForkJSON, error) {
	prec, err := f.resources.Store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	// Another state is the engine's to refuse, saying why.
	if prec.State == lifecycle.Paused {
		if _, err := f.runners.forkRunner(ctx, id); err != nil {
			return nil, err
		}
	}
	var fresh string
	rec, err := f.resources.engine.Fork(ctx, id, func(l *engine.Live) error {
		prec, err := f.resources.Store.Session(ctx, id)
		if err != nil {
			return err
		}
		r, w := l.Stream()
		fresh, err = client.OpenForkOf(ctx, r, w, prec)
		return err
	})
	if err != nil {
		f.resources.Log.Warn("a fork failed", "session", id, "err", err)
		return nil, err
	}
	f.resources.Log.Info("session forked", "session", id, "fork", rec.ID, "runner", rec.Runner)
	return &api.ForkJSON{Session: rec, Fresh: fresh}, nil
}

// forkParent is the session forked when run is a fork's start run; "".
func forkParent(run engine.Launch) string {
	if run.Kind == lifecycle.StartRun {
		return run.Record.ForkedFrom
	}
	return ""
}

// forkRunner is the runner of the start run of a fork of parent: parent's
// runner, where its environment is, connected, not draining, and of a
// protocol that makes forks.
func (rs *runners) forkRunner(ctx context.Context, parent string) (*runnerConn, error) {
	prec, err := rs.Store.Session(ctx, parent)
	if err != nil {
		return nil, err
	}
	rc := rs.pick(prec.AgentName, prec.RunnerID)
	if rc == nil || rc.id != prec.RunnerID {
		return nil, &NoRunnerError{Session: parent, Agent: prec.AgentName, Runner: cmp.Or(prec.Runner, "(unknown)"), Draining: rs.draining(prec.AgentName, prec.RunnerID)}
	}
	if !runnerproto.DoesForks(rc.version) {
		return nil, fmt.Errorf("session %s: %w", parent, &OldRunnerError{Runner: rc.name, Version: rc.version, Lacks: "forks"})
	}
	return rc, nil
}
