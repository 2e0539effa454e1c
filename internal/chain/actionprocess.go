package chain

import (
	"context"
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
)

// serveAction runs an action run: the configuration (loaded, or why not),
// the action's output on ACPOut, through the run's redaction, and its
// outcome on the control channel. It records nothing in the session's
// record: an action changes the environment, not the session's state.
func (sp *SessionProcess) serveAction(ctx context.Context, rec *lifecycle.Record, cfg *interp.Config, loadErr error) error {
	out := ActionOutcome{Err: loadErr}
	w := sp.Redactions.Writer(sp.ACPOut)
	if loadErr == nil {
		r := New(Options{
			Config:      cfg,
			SessionID:   sp.SessionID,
			ExecutionID: fmt.Sprintf("%s.%d.action", sp.SessionID, sp.Run),
			Kind:        lifecycle.ActionRun,
			Number:      sp.Run,
			ForkedFrom:  rec.ForkedFrom,
			Store:       sp.Store.Persisted(),
			Logger:      sp.Logger,
			Redactions:  sp.Redactions,
			StopGrace:   sp.StopGrace,
			Action:      &ActionCall{Name: sp.Action, Args: sp.ActionArgs, Out: w},
		})
		out = *r.Execute(ctx).Action
	}
	_ = w.Close() // an unfinished last line

	report := &lifecycle.ActionReport{Result: out.Result, Changes: out.Changes}
	if err := sp.Redactions.Error(out.Err); err != nil {
		report.Error = err.Error()
	}
	sp.send(lifecycle.Control{Kind: lifecycle.ControlAction, Run: sp.Run, Action: report})
	return nil
}
