package engine

import (
	"context"
	"errors"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// timers stops the run when it was inactive too long (L1: never while a
// request waits for its answer) or ran past its timeout, teardown runs
// included. A run that ignores a timeout stop for TimeoutGrace is failed
// (L5); one that ignores another stop, once its timeout (and at least
// TimeoutGrace) has passed since the stop. Either way it is killed with
// its process group. It sleeps on the engine's clock until the next
// deadline, or until one moves closer (poke): at the deadline itself,
// which the clock may have passed since it was read.
func (l *Live) timers() {
	clock := l.e.clock()
	grace := l.e.TimeoutGrace
	if grace == 0 {
		grace = lifecycle.TimeoutGrace
	}
	// A stop the run could not take (it reported its pause and is tearing
	// down): its deadline holds all the same.
	var refused *lifecycle.StopRecord
	for {
		now := clock.Now()
		l.mu.Lock()
		s := l.settings
		var idleAt time.Time
		// Inactivity counts once the run can take messages: from its first
		// report, never while a turn runs (L1).
		if l.got[lifecycle.ControlLoaded] && len(l.turns) == 0 && l.Kind != lifecycle.TeardownRun {
			idleAt = l.activity.Add(s.InactivityLimit)
		}
		timeoutAt := l.started.Add(s.Timeout)
		idle := !idleAt.IsZero() && !now.Before(idleAt)
		timedOut := !now.Before(timeoutAt)
		stop := l.stopped
		if stop == nil {
			stop = refused
		}
		if stop == nil && (idle || timedOut) {
			// Decided under the lock Send takes: no message slips in
			// between the decision and the stop.
			l.stopping = true
		}
		l.mu.Unlock()
		next := timeoutAt
		var err error
		switch {
		case stop != nil:
			next = stop.At.Add(ignoredFor(stop, s, grace))
			if !now.Before(next) {
				l.e.logger().Error("the run ignored its stop; failing it", "session", l.ID, "stop", stop.Reason)
				l.kill()
				return
			}
		case timedOut:
			err = l.Stop(lifecycle.Stop{Reason: lifecycle.Timeout})
			refused = refusedStop(err, lifecycle.Timeout, now)
		case idle:
			err = l.StopIdle()
			refused = refusedStop(err, lifecycle.Idle, now)
		case !idleAt.IsZero() && idleAt.Before(next):
			next = idleAt
		}
		if err != nil && refused == nil {
			// Not recorded: tried again at the next wake.
			l.e.logger().Warn("stopping the run failed", "session", l.ID, "err", err)
			next = now.Add(time.Second)
		} else if err == nil && (idle || timedOut) && stop == nil {
			continue // its stop's deadline is next
		}
		select {
		case <-l.exited:
			return
		case <-l.poke:
		case <-clock.At(next):
		}
	}
}

// refusedStop is the stop a run could not take, from what Stop returned.
func refusedStop(err error, reason lifecycle.Reason, at time.Time) *lifecycle.StopRecord {
	if errors.Is(err, ErrNoRun) {
		return &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: reason}, At: at}
	}
	return nil
}

// ignoredFor is how long a run may go on after stop before it is killed:
// TimeoutGrace after a timeout stop (L5); after another, the run's timeout,
// and never less than TimeoutGrace, so that a short timeout leaves the
// handlers their stop grace and the pause code its time.
func ignoredFor(stop *lifecycle.StopRecord, s lifecycle.Settings, grace time.Duration) time.Duration {
	if stop.Reason == lifecycle.Timeout {
		return grace
	}
	return max(s.Timeout, grace)
}

// KillGrace is how long a session process being killed has, beyond its
// stop grace, between SIGTERM (which shuts its run down: its plugs'
// processes are killed) and SIGKILL.
const KillGrace = 5 * time.Second

// kill ends a run that ignored its stop: SIGTERM to its process group, then,
// should it not exit in time, SIGKILL.
func (l *Live) kill() {
	l.proc.Signal(false)
	bound := l.e.StopGrace
	if bound == 0 {
		bound = lifecycle.DefaultStopGrace
	}
	select {
	case <-l.exited:
	case <-l.e.clock().After(bound + KillGrace):
		l.e.logger().Error("the session process outlived SIGTERM; killing it", "session", l.ID, "run", l.Run)
	}
	// What is left of its group too (the group cannot be reused while it
	// has members).
	l.proc.Signal(true)
}

// KeepRescan bounds how long Keep sleeps: sessions paused by other
// processes on the same state directory are seen at least this often.
const KeepRescan = time.Minute

// Keep does what sessions at rest need, when it is due, until ctx is done:
// expired paused sessions get a teardown run with reason expired (L6) and
// due teardown retries run (L2), as Sweep does once. A long-lived front
// end runs it, so that nothing waits for a `sessions sweep`. It sleeps on
// the engine's clock until the next due time.
func (e *Engine) Keep(ctx context.Context) {
	clock := e.clock()
	for {
		next, err := e.sweep(ctx)
		if err != nil && ctx.Err() == nil {
			e.logger().Warn("settling sessions", "err", err)
		}
		if rescan := clock.Now().Add(KeepRescan); next.IsZero() || rescan.Before(next) {
			next = rescan
		}
		select {
		case <-ctx.Done():
			return
		case <-e.keeperWake():
		case <-clock.At(next):
		}
	}
}

// keeperWake is signalled when a run of this engine ended: the session at
// rest may be due earlier than Keep knows.
func (e *Engine) keeperWake() chan struct{} {
	e.wakeOnce.Do(func() { e.wakeCh = make(chan struct{}, 1) })
	return e.wakeCh
}

// Wake has Keep sweep now: what a session due waits for may be there (a
// run ended; a server's runner connected).
func (e *Engine) Wake() {
	select {
	case e.keeperWake() <- struct{}{}:
	default:
	}
}
