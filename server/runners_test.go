package server

import (
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/runnerproto"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/blaiseagent/blaise-agent/sqlstore"
)

// TestIssue13_RunsTheServerCannotTakeBackAreStopped: after a restart, a
// runner hands back the runs it still has; the server takes none whose
// record moved on (paused, at a later run), of another agent or runner, or
// of a session it does not have, so that the runner stops them, and their
// records stay as they were.
func TestIssue13_RunsTheServerCannotTakeBackAreStopped(t *testing.T) {
	l := newLab(t)
	if _, err := l.store.CreateAgent(sqlstore.Agent{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	create := func(agent, runner string, runs int, paused bool) runnerproto.RunRef {
		t.Helper()
		rec := &session.Record{ID: l.store.NewSessionID(), Config: "/blaise.star", State: session.Active, Created: now, Updated: now,
			Settings: session.DefaultSettings(), Resumable: true, AgentName: agent, Runner: runner}
		for range runs {
			session.BeginRun(rec, session.StartRun, now)
		}
		if paused {
			session.ApplyPause(rec, session.Pause{Reason: session.Idle, MayResume: true}.Record(rec.Runs, now))
		}
		if err := l.store.CreateSession(rec); err != nil {
			t.Fatal(err)
		}
		return runnerproto.RunRef{Session: rec.ID, Run: 1}
	}
	refs := []runnerproto.RunRef{
		create("demo", "r1", 1, true),  // paused since
		create("demo", "r1", 2, false), // at its next run
		create("other", "r1", 1, false),
		create("demo", "r2", 1, false),
		{Session: "nosuchsess01", Run: 1},
	}
	before := map[string]time.Time{}
	for _, ref := range refs[:4] {
		rec, err := l.store.Session(ref.Session)
		if err != nil {
			t.Fatal(err)
		}
		before[ref.Session] = rec.Updated
	}
	st := l.runnerStream()
	frames := runnerproto.NewConn(st)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: runnerproto.Version, Runner: "r1", Runs: refs}); err != nil {
		t.Fatal(err)
	}
	w, err := frames.Receive()
	if err != nil || w.Kind != runnerproto.KindWelcome || w.Error != "" {
		t.Fatalf("welcome: %+v %v", w, err)
	}
	if len(w.Runs) != 0 {
		t.Fatalf("the server took back %v", w.Runs)
	}
	for id, updated := range before {
		if rec, err := l.store.Session(id); err != nil || !rec.Updated.Equal(updated) || l.s.engine.Running(id) != nil {
			t.Errorf("session %s changed: %+v %v", id, rec, err)
		}
	}
}
