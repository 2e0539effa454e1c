package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Fork makes a fork of the paused session parent: a new session with its
// configuration, directory and settings, whose start run's plugs know the
// parent (ctx.session.forked_from, ctx.persisted.parent) and make the
// fork's environment from the parent's as it is now. open is the front
// end's part of that run: it opens the fork's ACP session (forking the
// agent's conversation where the agent can). The run is then stopped as
// idle, and Fork returns the fork's record, paused.
//
// The parent's run lock is held throughout, so the parent stays paused and
// as it was: nothing resumes, ends or acts on it meanwhile. A parent with
// a run in progress (or an action) is refused with who holds it; one that
// is not paused is refused too. A fork that fails (open fails, the run
// fails or does not pause) is torn down, so that its plugs remove what
// they made, and its record is removed: nothing is left of it. One whose
// teardown cannot start now (a server's runner is gone) waits for it,
// never paused as if it were made. Its error is then a FailedForkError.
func (e *Engine) Fork(ctx context.Context, parent string, open func(*Live) error) (*lifecycle.Record, error) {
	lock, err := e.locks().RunLock(parent, false, true)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		return nil, fmt.Errorf("%w; a session is forked only while paused, once its run has paused (or the action has ended)", heldError(ctx, e.Store, parent))
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	prec, err := e.settleIfGone(ctx, parent)
	if err != nil {
		return nil, err
	}
	if prec.State != lifecycle.Paused {
		return nil, lifecycle.StateError(prec, "only a paused session can be forked")
	}
	if !prec.Resumable {
		return nil, fmt.Errorf("session %s: its chain cannot resume (a plug says resumable = False), so a fork of it could not pause", parent)
	}
	// Its plugs loaded even when ctx ends meanwhile, so that the fork is
	// undone below rather than left to run on.
	l, err := e.start(context.WithoutCancel(ctx), prec.Config, prec.Dir, prec.AgentName, prec.Owner, prec.Asked, prec.ID)
	if err != nil {
		return nil, fmt.Errorf("forking session %s: %w", parent, err)
	}
	fail := func(cause error) (*lifecycle.Record, error) {
		// Undone even when ctx ended meanwhile: no half-made fork is left.
		return nil, &FailedForkError{forkRun{e: e, l: l, parent: parent}.undo(context.WithoutCancel(ctx), cause)}
	}
	if err := open(l); err != nil {
		return fail(err)
	}
	// Paused whatever the idle policy: a fork is made to be continued.
	if err := l.Stop(lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}); err != nil && !errors.Is(err, ErrNoRun) {
		return fail(err)
	}
	rec, err := l.Wait(ctx)
	switch {
	case err != nil:
		return fail(err)
	case rec.State != lifecycle.Paused:
		return fail(fmt.Errorf("its first run did not pause: the fork %s is %s", rec.ID, rec.State))
	case failedRun(rec, l.Run) != nil:
		return fail(failedRun(rec, l.Run))
	}
	return rec, nil
}

// forking reports whether rec is a fork at its first run, which only the
// Fork that began it can finish.
func forking(rec *lifecycle.Record) bool {
	return rec.ForkedFrom != "" && rec.Runs == 1 && rec.State == lifecycle.Active
}

// settleUnmadeFork settles the first run of a fork that died without a
// word, or that no process adopted (settleIfGone): the fork was never
// made, so it fails and is over, torn down by the sweeps as soon as they
// can, never paused as if it were made; now is when.
func settleUnmadeFork(ctx context.Context, store lifecycle.Store, id string, now time.Time) (*lifecycle.Record, error) {
	return store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		if !forking(r) {
			return nil
		}
		p := lifecycle.Pause{Reason: lifecycle.Failed, Err: fmt.Errorf("the fork of session %s was not made: the process making it ended first (a server that restarted, or a sessions fork killed), and its first run with it; the fork is torn down", r.ForkedFrom)}
		lifecycle.ApplyPause(r, p.Record(r.Runs, now))
		r.PID = 0
		return nil
	})
}

// FailedForkError is the error of a fork that failed once its first run
// had started, rather than being refused: Err says why, and what became of
// the fork (undone, or waiting for its teardown).
type FailedForkError struct{ Err error }

func (e *FailedForkError) Error() string { return e.Err.Error() }
func (e *FailedForkError) Unwrap() error { return e.Err }

// failedRun is why run failed, from rec; nil when it did not.
func failedRun(rec *lifecycle.Record, run int) error {
	if p := rec.Pause; p != nil && p.Run == run && p.Reason == lifecycle.Failed {
		return fmt.Errorf("its first run failed: %s", p.Error)
	}
	return nil
}

// forkRun is the first run of a fork of parent, l.
type forkRun struct {
	e      *Engine
	l      *Live
	parent string
}

// undo removes the fork, whose first run failed with cause: the run is
// stopped, the fork torn down (its plugs remove what they made) and its
// record removed. The error is the run's failure when it failed (the ACP
// session could not open because a plug failed), else cause. A teardown
// that fails leaves the fork to the sweeps, as any session whose teardown
// failed, and the error says so.
func (f forkRun) undo(ctx context.Context, cause error) error {
	e, l, parent := f.e, f.l, f.parent
	if err := l.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil && !errors.Is(err, ErrNoRun) {
		e.logger().Warn("stopping the fork's run failed", "session", l.ID, "err", err)
	}
	rec, err := l.Wait(ctx)
	if err == nil && failedRun(rec, l.Run) != nil {
		cause = failedRun(rec, l.Run)
	}
	cause = fmt.Errorf("forking session %s: %w", parent, cause)
	if err == nil && rec.State == lifecycle.Paused {
		var ended *lifecycle.Record
		if ended, err = e.End(ctx, l.ID); err != nil {
			return f.leave(ctx, cause, err)
		}
		rec = ended
	}
	if err != nil {
		return fmt.Errorf("%w; and removing the fork %s failed: %v", cause, l.ID, err)
	}
	if rec.State != lifecycle.Ended {
		return fmt.Errorf("%w; and the fork %s could not be removed: it is %s (blaise-agent sessions show %s): %v", cause, l.ID, rec.State, l.ID, rec.Unsettled())
	}
	if err := e.Store.Discard(ctx, l.ID); err != nil {
		return errors.Join(cause, fmt.Errorf("removing the record of the fork %s: %w", l.ID, err))
	}
	return fmt.Errorf("%w; the fork was torn down and removed, session %s is as it was", cause, parent)
}

// leave marks the fork for its teardown, which could not start (a
// server's runner is gone: endErr), so that the sweeps tear it down once
// they can: it is never left paused as if it were made. Its record keeps
// why its first run failed.
func (f forkRun) leave(ctx context.Context, cause, endErr error) error {
	id := f.l.ID
	_, err := f.e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		if r.State == lifecycle.Paused {
			r.State, r.EndReason = lifecycle.TearingDown, lifecycle.Closed
			r.PausedAt, r.ExpiresAt = time.Time{}, time.Time{}
			r.Teardown.NextAt = f.e.now()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w; and removing the fork %s failed: %v; and marking it for its teardown: %v", cause, id, endErr, err)
	}
	return fmt.Errorf("%w; the fork %s could not be torn down now (%v): it waits for its teardown, done as soon as it can be (blaise-agent sessions show %s)", cause, id, endErr, id)
}

// heldError is the error of a command refused because another process
// holds session id's run lock, naming what holds it as far as its record
// in store tells.
func heldError(ctx context.Context, store lifecycle.Store, id string) error {
	err := activeError(id)
	rec, rerr := store.Session(ctx, id)
	if rerr != nil {
		return err
	}
	switch rec.State {
	case lifecycle.Active:
		run := fmt.Sprintf("run %d", rec.Runs)
		if n := len(rec.History); n > 0 && rec.History[n-1].Kind != "" {
			run = fmt.Sprintf("%s %s", rec.History[n-1].Kind, run)
		}
		if rec.PID != 0 {
			return fmt.Errorf("%w: its %s, session process %d", err, run, rec.PID)
		}
		return fmt.Errorf("%w: its %s", err, run)
	case lifecycle.Paused:
		return fmt.Errorf("%w: an action on it, or a command ending or forking it", err)
	case lifecycle.TearingDown, lifecycle.Orphaned:
		return fmt.Errorf("%w: its teardown", err)
	}
	return err
}
