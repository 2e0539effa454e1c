package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// ErrOutcomeUnknown is the error of an action whose run ended before it
// reported how the action went.
var ErrOutcomeUnknown = errors.New("its outcome is unknown")

// ActionResult is what an action run reported: the value its plug
// returned, as JSON (nil for None).
type ActionResult struct {
	Result json.RawMessage
}

// Act does an action a plug of the session offers (an action run,
// docs/plugs.md#actions) and waits for it; out receives what the action
// writes, as it writes it. Only a paused session takes actions: its run
// lock is the action's while it runs, so a session with a run in progress
// (a turn, a teardown, another action) refuses it and changes nothing,
// and nothing resumes, ends or sweeps it meanwhile. The session's record
// stays as it was. Cancelling ctx stops the action's run (SIGTERM).
func (e *Engine) Act(ctx context.Context, id, action string, args json.RawMessage, out io.Writer) (*ActionResult, error) {
	lock, err := e.locks().RunLock(id, false, true)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		return nil, fmt.Errorf("%w; an action runs only on a paused session, once its run has paused (or the other action has ended)", activeError(id))
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	rec, err := e.settleIfGone(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State != lifecycle.Paused {
		return nil, lifecycle.StateError(rec, "actions run only on a paused session")
	}
	flags := []string{"--session", rec.ID, "--kind", string(lifecycle.ActionRun), "--run", strconv.Itoa(rec.Runs), "--action", action}
	if len(args) > 0 {
		flags = append(flags, "--action-args", string(args))
	}
	if e.StopGrace != 0 {
		flags = append(flags, "--stop-grace", e.StopGrace.String())
	}
	held, err := lock.Dup()
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	defer held.Release()
	launcher := e.Launcher
	if launcher == nil {
		launcher = Local{Engine: e}
	}
	proc, err := launcher.Launch(ctx, Launch{Record: rec, Lock: held, Flags: flags, Kind: lifecycle.ActionRun, Action: action, ActionArgs: args})
	if err != nil {
		return nil, err
	}
	_ = proc.Stdin().Close()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, proc.Stdout())
		_ = proc.Stdout().Close()
		copied <- err
	}()
	reported := make(chan *lifecycle.ActionReport, 1)
	go func() {
		ctl := NewControlConn(proc.Control(), proc.Control())
		var report *lifecycle.ActionReport
		for {
			c, err := ctl.Receive()
			if err != nil {
				break
			}
			if c.Kind == lifecycle.ControlAction && c.Action != nil {
				report = c.Action
			}
		}
		reported <- report
	}()
	waited := make(chan error, 1)
	// The three are waited for below (waited, reported, copied).
	go func() { waited <- proc.Wait() }()
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		proc.Signal(false)
		waitErr = <-waited
	}
	// The report is read to the channel's end, which the process's exit
	// closes: closing it before would lose a report still in flight.
	report := <-reported
	_ = proc.Control().Close()
	copyErr := <-copied
	switch {
	case report == nil && waitErr != nil:
		return nil, fmt.Errorf("session %s: the run of action %s ended before it reported how the action went (%v); the session is as it was, but what the action had begun in its environment may be left: %w", id, action, waitErr, ErrOutcomeUnknown)
	case report == nil:
		return nil, fmt.Errorf("session %s: the run of action %s ended before it reported how the action went: %w", id, action, ErrOutcomeUnknown)
	case report.Error != "":
		// Whoever asked says it; the session process logged it whole.
		return nil, errors.New(lifecycle.WithoutTraceback(report.Error))
	case copyErr != nil:
		return nil, fmt.Errorf("session %s: action %s: its output: %w", id, action, copyErr)
	}
	if report.Changes != nil {
		if _, err := e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error { r.Changes = report.Changes; return nil }); err != nil {
			return nil, fmt.Errorf("session %s: recording the summary of its changes: %w", id, err)
		}
	}
	return &ActionResult{Result: report.Result}, nil
}
