package blaise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/charmbracelet/log"
)

// SessionProcess is one run of a session, in a process of its own (C13):
// the chain and its agent, with ACP on ACPIn/ACPOut and the front end on
// Control. It records its reports in the store itself, so that a front end
// that dies loses nothing.
type SessionProcess struct {
	Store     *Store
	SessionID string
	Kind      runner.Kind
	Run       int    // the run's number
	EndReason string // for teardown runs
	ACPIn     io.Reader
	ACPOut    io.Writer
	Control   *ControlConn // nil: no front end
	Logger    *log.Logger
	MaxLine   int
	// Agent, when set, replaces the command and arguments of the
	// configuration's agent.
	Agent []string
	// StopGrace: runner.Options.StopGrace.
	StopGrace time.Duration
}

// Serve runs the run to its end.
func (sp *SessionProcess) Serve(ctx context.Context) error {
	logger := sp.Logger
	if logger == nil {
		logger = log.Default()
	}
	rec, err := sp.Store.Session(sp.SessionID)
	if err != nil {
		return err
	}
	cfg, err := runner.LoadConfig(rec.Config, logger)
	if err != nil {
		// The run breaks before it can pause or tear down: report that (L7).
		if sp.Kind == runner.Teardown {
			return errors.Join(err, sp.tornDown("", err))
		}
		_ = sp.report(Pause{Run: sp.Run, Reason: builtins.ReasonFailed, MayResume: rec.Settings.IdlePolicy == PolicyPause, Error: err.Error()})
		return err
	}
	if len(sp.Agent) > 0 {
		cfg.Agent.Command, cfg.Agent.Args = sp.Agent[0], sp.Agent[1:]
	}
	resumable := cfg.Resumable()
	orphans, err := sp.orphans(cfg.Uses)
	if err != nil {
		return err
	}
	if _, err := sp.Store.UpdateSession(sp.SessionID, func(r *SessionRecord) error {
		r.Resumable, r.OrphanedState, r.PID = resumable, orphans, os.Getpid()
		return nil
	}); err != nil {
		return err
	}
	for _, id := range orphans {
		// Named by the plug that stored it, so a person knows what to clean.
		name, _, _ := sp.Store.PersistedPlug(sp.SessionID, id)
		logger.Warn("stored plug state belongs to no plug of the configuration", "session", sp.SessionID, "plug_id", id, "stored_by", name)
	}
	sp.send(Control{Type: "resumable", Run: sp.Run, Resumable: resumable})

	transcript, err := acp.CreateTranscript(sp.Store.TranscriptPath(sp.SessionID))
	if err != nil {
		return err
	}
	defer transcript.Close()
	opts := runner.Options{
		Config:           cfg,
		SessionID:        sp.SessionID,
		ExecutionID:      fmt.Sprintf("%s.%d", sp.SessionID, sp.Run),
		Kind:             sp.Kind,
		Number:           sp.Run,
		EndReason:        sp.EndReason,
		Store:            sp.Store.Persisted(),
		Logger:           logger,
		FailureMayResume: rec.Settings.IdlePolicy == PolicyPause,
		StartupLimit:     rec.Settings.StartupLimit,
		Recorder:         transcript,
		MaxLine:          sp.MaxLine,
		StopGrace:        sp.StopGrace,
		OnPause: func(p builtins.PauseInfo) error {
			pause := Pause{Run: sp.Run, Reason: p.Reason, MayResume: p.MayResume}
			if p.Err != nil {
				pause.Error = p.Err.Error()
			}
			return sp.report(pause)
		},
		OnAttach: func(plug string) {
			sp.send(Control{Type: ControlAttaching, Run: sp.Run, Plug: plug})
		},
	}
	if sp.Kind == runner.Teardown && sp.EndReason == builtins.ReasonFailed && rec.Pause != nil && rec.Pause.Error != "" {
		// A teardown after a failure, in a run of its own: the pause's error.
		opts.EndError = errors.New(rec.Pause.Error)
	}
	if sp.Kind != runner.Teardown {
		opts.Client = &runner.Client{In: sp.ACPIn, Out: sp.ACPOut}
	}
	r := runner.New(opts)
	rec.Resumable = resumable // what a lost front end's stop is based on (L9)
	go sp.listen(r, rec)
	res := r.Run(ctx)

	if res.Teardown == nil {
		return res.ReportErr
	}
	return errors.Join(res.ReportErr, sp.tornDown(res.Teardown.Reason, res.TeardownErr))
}

// tornDown records a teardown's outcome and tells the front end: the
// session ends and its persisted state goes, or a retry is due (L2).
func (sp *SessionProcess) tornDown(reason string, failure error) error {
	updated, err := sp.Store.UpdateSession(sp.SessionID, func(r *SessionRecord) error {
		ApplyTeardown(r, failure, time.Now())
		return nil
	})
	if err == nil && updated.State == Ended {
		err = sp.Store.DeletePersisted(sp.SessionID)
	}
	c := Control{Type: "teardown", Run: sp.Run, Reason: reason}
	if failure != nil {
		c.Error = failure.Error()
	}
	sp.send(c)
	return err
}

// report records a pause and tells the front end.
func (sp *SessionProcess) report(p Pause) error {
	now := time.Now()
	_, err := sp.Store.UpdateSession(sp.SessionID, func(r *SessionRecord) error {
		ApplyPause(r, p, now)
		return nil
	})
	sp.send(Control{Type: "pause", Run: p.Run, Reason: p.Reason, MayResume: p.MayResume, Error: p.Error})
	return err
}

func (sp *SessionProcess) send(c Control) {
	if sp.Control != nil {
		if err := sp.Control.Send(c); err != nil {
			sp.Logger.Debug("the front end is gone", "err", err)
		}
	}
}

// listen passes stop directives to the run. When the front end goes away,
// the session stops as idle under its policy (L9).
func (sp *SessionProcess) listen(r *runner.Run, rec *SessionRecord) {
	if sp.Control == nil {
		return
	}
	for {
		c, err := sp.Control.Receive()
		if err != nil {
			stop := StopFor(rec)
			r.Stop(runner.Stop{Reason: stop.Reason, MayResume: stop.MayResume})
			return
		}
		if c.Type == "stop" {
			r.Stop(runner.Stop{Reason: c.Reason, MayResume: c.MayResume})
		}
	}
}

// orphans lists the stored plug ids that no plug of the chain has (L7).
func (sp *SessionProcess) orphans(uses []*interp.Use) ([]string, error) {
	stored, err := sp.Store.PersistedIDs(sp.SessionID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range stored {
		if !slices.ContainsFunc(uses, func(u *interp.Use) bool { return u.ID == id && u.Plug.Persisted != nil }) {
			out = append(out, id)
		}
	}
	return out, nil
}
