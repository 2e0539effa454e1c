package blaise_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/blaise/enginetest"
	"github.com/blaiseagent/blaise-agent/session"
)

// movingClock is a fake clock that moves by jump just before the first
// wait on it is registered: what a test's Advance (or a busy machine's
// time) does between the engine's reading of the clock and its wait.
type movingClock struct {
	*session.FakeClock
	jump time.Duration
	once sync.Once
}

func (c *movingClock) move() { c.once.Do(func() { c.FakeClock.Advance(c.jump) }) }

func (c *movingClock) After(d time.Duration) <-chan time.Time {
	c.move()
	return c.FakeClock.After(d)
}

func (c *movingClock) At(t time.Time) <-chan time.Time {
	c.move()
	return c.FakeClock.At(t)
}

// TestL5_ATimeoutPassedBeforeTheTimersWaitStopsTheRun: the clock passes
// the run's timeout after the run's timers read it and before they wait
// for their next deadline. The run is stopped as timed out all the same:
// the timers wait for the deadline itself, not for its distance from a
// reading of the clock that is already past (which waited on the server,
// under load, until the test gave up: the run was never killed).
func TestL5_ATimeoutPassedBeforeTheTimersWaitStopsTheRun(t *testing.T) {
	store, fake, rec := runInProgress(t, nil)
	clock := &movingClock{FakeClock: fake, jump: rec.Settings.Timeout}
	// The timed-out session's teardown, once the run has ended.
	teardowns := launcher{t, make(chan blaise.Launch, 1)}
	e := &blaise.Engine{Store: store, Clock: clock, Launcher: teardowns, AdoptUntil: fake.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	live, err := e.Adopt(rec.ID, 1, proc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.end()
		if _, err := live.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	got := make(chan session.Control, 1)
	go func() {
		if m, err := proc.peerCtl.Receive(); err == nil {
			got <- m
		}
	}()
	select {
	case m := <-got:
		if m.Kind != session.ControlStop || m.Stop == nil || m.Stop.Reason != session.Timeout {
			t.Fatalf("the run got %+v, want its timeout stop", m)
		}
	case <-time.After(enginetest.Patience):
		t.Fatalf("the run was not stopped; the clock is at its timeout plus %s", fake.Now().Sub(rec.Created.Add(rec.Settings.Timeout)))
	}
}

// launcher hands each launch to the test; its process ends at once.
type launcher struct {
	t    *testing.T
	runs chan blaise.Launch
}

func (l launcher) Launch(run blaise.Launch) (blaise.Process, error) {
	l.runs <- run
	p := newPipeProcess(l.t)
	p.end()
	return p, nil
}

// TestL6_AnExpiryPassedBeforeKeepWaitsTearsTheSessionDown: the clock
// passes a paused session's expiry after Keep read it and before Keep
// waits. Keep wakes at its deadline all the same and tears the session
// down as expired (L6), without any other wake.
func TestL6_AnExpiryPassedBeforeKeepWaitsTearsTheSessionDown(t *testing.T) {
	store, fake, rec := runInProgress(t, func(r *session.Record) {
		session.ApplyPause(r, session.PauseRecord{Reason: session.Idle, MayResume: true, Run: 1, At: r.Created})
	})
	if rec.State != session.Paused {
		t.Fatalf("record %+v", rec)
	}
	clock := &movingClock{FakeClock: fake, jump: rec.Settings.PausedLifetime + time.Minute}
	ls := launcher{t, make(chan blaise.Launch, 1)}
	e := &blaise.Engine{Store: store, Clock: clock, Launcher: ls}
	ctx, cancel := context.WithCancel(context.Background())
	kept := make(chan struct{})
	go func() { defer close(kept); e.Keep(ctx) }()
	t.Cleanup(func() { cancel(); <-kept })
	select {
	case run := <-ls.runs:
		if run.Record.ID != rec.ID || !slices.Contains(run.Flags, string(session.Expired)) {
			t.Fatalf("Keep launched %+v, want the teardown of %s as expired", run, rec.ID)
		}
	case <-time.After(enginetest.Patience):
		t.Fatalf("Keep did not tear the session down: the clock is %s past its expiry", fake.Now().Sub(rec.ExpiresAt))
	}
}
