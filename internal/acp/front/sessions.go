package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// Sessions is what the front end needs of the lifecycle engine: starting and
// resuming runs, ending sessions that are not running, and reading their
// records. [FromEngine] adapts a *engine.Engine.
type Sessions interface {
	// Start creates a session of the configuration and starts its first
	// run, in dir (the session's directory, where all its runs run);
	// empty: the front end's.
	Start(ctx context.Context, config, dir string) (Run, error)
	// Resume starts a resume run of a paused session.
	Resume(ctx context.Context, id string) (Run, error)
	// Claim returns the run in progress of a session that no front end
	// holds (a server took it back after a restart), once; nil when there
	// is none.
	Claim(ctx context.Context, id string) Run
	// End ends a session that has no run in progress (reason closed) and
	// waits for its teardown.
	End(ctx context.Context, id string) error
	// Session returns the session's record; its error wraps
	// lifecycle.ErrNotFound for an unknown session.
	Session(ctx context.Context, id string) (*lifecycle.Record, error)
	// List returns every stored session.
	List(ctx context.Context) ([]*lifecycle.Record, error)
	// ReadTranscript opens the session's transcript.
	ReadTranscript(ctx context.Context, id string) (io.ReadCloser, error)
}

// Run is a run in progress, in a session process of its own (see
// engine.Live).
type Run interface {
	SessionID() string // the blaise session id
	Number() int       // the run's number in its session
	// Send passes a client message to the session.
	Send(m *acp.Message) error
	// Messages delivers the session's messages for the client; it is closed
	// when the run's output ends.
	Messages() <-chan *acp.Message
	// Stop sends a stop directive; StopIdle stops the run as idle under the
	// session's idle policy (L9).
	Stop(s lifecycle.Stop) error
	StopIdle() error
	// Done is closed when the run has ended and its record is settled.
	Done() <-chan struct{}
}

// FromEngine returns the sessions of a lifecycle engine.
func FromEngine(e *engine.Engine) Sessions { return engineSessions{e: e} }

// ForAgent returns the sessions of a server's named agent, for a client
// whose API token is owner's: new ones get the agent's name and settings
// and the owner, and only the agent's sessions are listed.
func ForAgent(e *engine.Engine, agent, owner string, settings lifecycle.Settings) Sessions {
	return engineSessions{e: e, agent: agent, owner: owner, settings: settings}
}

type engineSessions struct {
	e        *engine.Engine
	agent    string // "": the sessions of this machine
	owner    string
	settings lifecycle.Settings
}

func (s engineSessions) Start(ctx context.Context, config, dir string) (Run, error) {
	var l *engine.Live
	var err error
	if s.agent != "" {
		// A runner of the server's agent runs it, in a directory of its own.
		l, err = s.e.StartAgent(ctx, config, s.agent, s.owner, s.settings)
	} else {
		l, err = s.e.StartIn(ctx, config, dir)
	}
	if err != nil {
		return nil, err
	}
	return liveRun{l}, nil
}

func (s engineSessions) Resume(ctx context.Context, id string) (Run, error) {
	if _, err := s.Session(ctx, id); err != nil {
		return nil, err
	}
	l, err := s.e.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return liveRun{l}, nil
}

func (s engineSessions) Claim(ctx context.Context, id string) Run {
	if _, err := s.Session(ctx, id); err != nil {
		return nil
	}
	if l := s.e.Claim(id); l != nil {
		return liveRun{l}
	}
	return nil
}

func (s engineSessions) End(ctx context.Context, id string) error {
	if _, err := s.Session(ctx, id); err != nil {
		return err
	}
	_, err := s.e.End(ctx, id)
	return err
}

// Session returns a session's record; a session of another agent is not
// found.
func (s engineSessions) Session(ctx context.Context, id string) (*lifecycle.Record, error) {
	rec, err := s.e.Store.Session(ctx, id)
	if err == nil && s.agent != "" && rec.AgentName != s.agent {
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound)
	}
	return rec, err
}

// List returns the sessions whose records can be read: a broken record is
// logged, and hides none of the others.
func (s engineSessions) List(ctx context.Context) ([]*lifecycle.Record, error) {
	// The sessions opened a moment ago are listed with their ACP session.
	if err := s.e.Noted(ctx); err != nil {
		return nil, err
	}
	recs, err := s.e.Store.Sessions(ctx)
	if s.agent != "" {
		recs = slices.DeleteFunc(recs, func(r *lifecycle.Record) bool { return r.AgentName != s.agent })
	}
	var broken *lifecycle.BrokenError
	if errors.As(err, &broken) {
		if s.e.Log != nil {
			s.e.Log.Warn("listing sessions", "err", err)
		}
		return recs, nil
	}
	return recs, err
}

func (s engineSessions) ReadTranscript(ctx context.Context, id string) (io.ReadCloser, error) {
	return s.e.Store.ReadTranscript(ctx, id)
}

type liveRun struct{ *engine.Live }

func (r liveRun) SessionID() string { return r.Live.ID }
func (r liveRun) Number() int       { return r.Live.Run }
