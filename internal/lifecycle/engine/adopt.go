package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Adopt takes over run number run of a session, in progress in proc, that
// a process before this one started on the same store: a server that
// restarted, whose runner hands the run back. The record must show the run
// in progress (active or tearing down, the run not ended) and no run of
// this engine may hold the session; otherwise the run is not the
// session's any more, and its error says why. The run goes on as if this
// engine had started it; its messages wait for a front end to Claim it.
// proc must be connected: a stop recorded and never sent is sent now (L3).
func (e *Engine) Adopt(ctx context.Context, id string, run int, proc Process) (*Live, error) {
	lock, err := e.locks().RunLock(id, false, false)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		err = activeError(id)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: run %d cannot be adopted: %w", id, run, err)
	}
	rec, h, err := e.inProgress(ctx, id, run)
	if err != nil {
		lock.Release()
		return nil, err
	}
	l := e.newLive(ctx, rec, h.Kind, proc, lock)
	// Its plugs are loaded: inactivity counts from now; its timeout from
	// when it began.
	close(l.loaded)
	l.got[lifecycle.ControlLoaded] = true
	l.started, l.unclaimed = h.Started, true
	if st := rec.Stop; st != nil && st.Run == run {
		l.stopped, l.stopping = st, true
		if !st.Delivered {
			// Recorded before the restart, never sent (L3): sent now,
			// before the timers start, and its grace counts from now,
			// not from when it was recorded (L5).
			resent := *st
			resent.At = e.now()
			l.stopped = &resent
			e.resendStop(l, &resent)
		}
	}
	e.run(l)
	return l, nil
}

// resendStop sends st, the stop of the run l takes over, and records it
// as sent at st.At, delivered when the send succeeded.
func (e *Engine) resendStop(l *Live, st *lifecycle.StopRecord) {
	err := l.ctl.Send(lifecycle.Control{Kind: lifecycle.ControlStop, Run: l.Run, Stop: &st.Stop})
	if err != nil {
		e.logger().Warn("sending the stop of an adopted run failed", "session", l.ID, "run", l.Run, "err", err)
	}
	st.Delivered = err == nil
	if _, err := e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error {
		if r.Stop != nil && r.Stop.Run == l.Run {
			r.Stop.At, r.Stop.Delivered = st.At, st.Delivered
		}
		return nil
	}); err != nil {
		e.logger().Warn("recording the stop sent again failed", "session", l.ID, "run", l.Run, "err", err)
	}
}

// Adoptable says why Adopt would not take run number run of a session, or
// nil when it would, as things are now.
func (e *Engine) Adoptable(ctx context.Context, id string, run int) error {
	if e.Running(id) != nil {
		return fmt.Errorf("session %s: run %d cannot be adopted: %w", id, run, activeError(id))
	}
	_, _, err := e.inProgress(ctx, id, run)
	return err
}

// inProgress returns the record of a session, and the history of its run
// n, when the record shows that run in progress.
func (e *Engine) inProgress(ctx context.Context, id string, n int) (*lifecycle.Record, lifecycle.RunRecord, error) {
	rec, err := e.Store.Session(ctx, id)
	var h lifecycle.RunRecord
	if err == nil {
		h, err = runInProgress(rec, n)
	}
	if err == nil && forking(rec) {
		// The Fork that made it, which opens its ACP session and pauses
		// it, went with the process before: the run would go on as an
		// orphan of it, a fork never made.
		err = fmt.Errorf("it is the first run of a fork of session %s, whose making went with the process that began it", rec.ForkedFrom)
	}
	if err != nil {
		return nil, h, fmt.Errorf("session %s: run %d cannot be adopted: %w", id, n, err)
	}
	return rec, h, nil
}

// runInProgress returns the history of run n of rec when the record shows
// it in progress: the session active or tearing down, at that run, which
// has not ended.
func runInProgress(rec *lifecycle.Record, n int) (lifecycle.RunRecord, error) {
	if rec.State != lifecycle.Active && rec.State != lifecycle.TearingDown {
		return lifecycle.RunRecord{}, lifecycle.StateError(rec, "its run is not in progress")
	}
	if rec.Runs != n {
		return lifecycle.RunRecord{}, fmt.Errorf("the session is at run %d", rec.Runs)
	}
	for _, h := range rec.History {
		if h.Run != n {
			continue
		}
		if !h.Ended.IsZero() {
			return h, errors.New("the run has ended")
		}
		return h, nil
	}
	return lifecycle.RunRecord{}, errors.New("the record has no history of the run")
}

// adopting reports whether rec shows a run in progress that may still be
// handed back (AdoptUntil): no one settles it meanwhile.
func (e *Engine) adopting(rec *lifecycle.Record) bool {
	if !e.now().Before(e.AdoptUntil) {
		return false
	}
	_, err := runInProgress(rec, rec.Runs)
	return err == nil
}
