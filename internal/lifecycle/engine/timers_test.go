package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine/enginetest"
)

// movingClock is a fake clock that moves by jump just before the first
// wait on it is registered: what a test's Advance (or a busy machine's
// time) does between the engine's reading of the clock and its wait.
type movingClock struct {
	*lifecycle.FakeClock
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
	teardowns := launcher{t, make(chan engine.Launch, 1)}
	e := &engine.Engine{Store: store, Clock: clock, Launcher: teardowns, AdoptUntil: fake.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	live, err := e.Adopt(t.Context(), rec.ID, 1, proc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.end()
		if _, err := live.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	got := make(chan lifecycle.Control, 1)
	go func() {
		if m, err := proc.peerCtl.Receive(); err == nil {
			got <- m
		}
	}()
	select {
	case m := <-got:
		if m.Kind != lifecycle.ControlStop || m.Stop == nil || m.Stop.Reason != lifecycle.Timeout {
			t.Fatalf("the run got %+v, want its timeout stop", m)
		}
	case <-time.After(enginetest.Patience):
		t.Fatalf("the run was not stopped; the clock is at its timeout plus %s", fake.Now().Sub(rec.Created.Add(rec.Settings.Timeout)))
	}
}

// launcher hands each launch to the test; its process ends at once.
type launcher struct {
	t    *testing.T
	runs chan engine.Launch
}

func (l launcher) Launch(_ context.Context, run engine.Launch) (engine.Process, error) {
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
	store, fake, rec := runInProgress(t, func(r *lifecycle.Record) {
		lifecycle.ApplyPause(r, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, Run: 1, At: r.Created})
	})
	if rec.State != lifecycle.Paused {
		t.Fatalf("record %+v", rec)
	}
	clock := &movingClock{FakeClock: fake, jump: rec.Settings.PausedLifetime + time.Minute}
	ls := launcher{t, make(chan engine.Launch, 1)}
	// The teardown's process ends at once, without reporting: the engine
	// records that in the state directory, which must be done before the
	// test's directory is removed.
	settled := make(chan *lifecycle.Record, 1)
	e := &engine.Engine{Store: store, Clock: clock, Launcher: ls, Settled: func(r *lifecycle.Record) { settled <- r }}
	ctx, cancel := context.WithCancel(context.Background())
	kept := make(chan struct{})
	go func() { defer close(kept); e.Keep(ctx) }()
	t.Cleanup(func() { cancel(); <-kept })
	select {
	case run := <-ls.runs:
		if run.Record.ID != rec.ID || !slices.Contains(run.Flags, string(lifecycle.Expired)) {
			t.Fatalf("Keep launched %+v, want the teardown of %s as expired", run, rec.ID)
		}
	case <-time.After(enginetest.Patience):
		t.Fatalf("Keep did not tear the session down: the clock is %s past its expiry", fake.Now().Sub(rec.ExpiresAt))
	}
	select {
	case final := <-settled:
		if final.EndReason != lifecycle.Expired {
			t.Fatalf("the teardown settled the session as %+v, want it ended for %s", final, lifecycle.Expired)
		}
	case <-time.After(enginetest.Patience):
		t.Fatal("the teardown run was not settled")
	}
}

// heldDelivery is a store that holds the update recording a stop as
// delivered (Live.Stop, once its send returned) until release is closed;
// delivering is closed when it is held.
type heldDelivery struct {
	lifecycle.Store
	delivering, release chan struct{}
	once                sync.Once
}

func (h *heldDelivery) UpdateSession(ctx context.Context, id string, fn func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	// fn tried on a copy read before: does it record the delivery?
	if rec, err := h.Store.Session(ctx, id); err == nil && rec.Stop != nil && !rec.Stop.Delivered {
		if fn(rec) == nil && rec.Stop != nil && rec.Stop.Delivered {
			h.once.Do(func() {
				close(h.delivering)
				<-h.release
			})
		}
	}
	return h.Store.UpdateSession(ctx, id, fn)
}

// TestL3_ARunThatEndsWhileItsStopIsRecordedAsSentEndsWithTheStopDelivered:
// the run takes its stop, pauses and ends before the engine has recorded
// the stop as delivered (seen on the server under load, where the send
// returns late). The record the run ends with has the stop delivered: the
// engine settles the run once the stop is recorded, not before.
func TestL3_ARunThatEndsWhileItsStopIsRecordedAsSentEndsWithTheStopDelivered(t *testing.T) {
	store, clock, rec := runInProgress(t, nil)
	held := &heldDelivery{Store: store, delivering: make(chan struct{}), release: make(chan struct{})}
	e := &engine.Engine{Store: held, Clock: clock, AdoptUntil: clock.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	live, err := e.Adopt(t.Context(), rec.ID, 1, proc)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- live.Stop(lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}) }()
	<-held.delivering
	if m, err := proc.peerCtl.Receive(); err != nil || m.Kind != lifecycle.ControlStop {
		t.Fatalf("the run got %+v %v, want its stop", m, err)
	}
	// The run pauses, reports it and ends, as a session process does.
	pause := lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, Run: 1, At: clock.Now()}
	if _, err := store.UpdateSession(t.Context(), rec.ID, func(r *lifecycle.Record) error { lifecycle.ApplyPause(r, pause); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := proc.peerCtl.Send(lifecycle.Control{Kind: lifecycle.ControlPause, Run: 1, Pause: &pause}); err != nil {
		t.Fatal(err)
	}
	proc.end()
	<-proc.stdinClosed // the engine is settling the run
	close(held.release)
	final, err := live.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if final.State != lifecycle.Paused || final.Stop == nil || !final.Stop.Delivered {
		t.Fatalf("the run ended with state %s, stop %+v; want paused, its stop delivered", final.State, final.Stop)
	}
}
