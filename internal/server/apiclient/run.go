package apiclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
	"github.com/blaiseagent/blaise-agent/internal/terminal/termrun"
)

// Terminal is `run --server`: a session of a server's agent in the
// terminal, as `run` has a session of this machine.
type Terminal struct {
	Client  *Client
	Agent   string
	Term    *client.Terminal
	Session string // continue this paused session; "": a new one
	// Continue continues the agent's most recently paused session of
	// this client's API token's name (Client.LastPaused).
	Continue bool
	// Prompts are sent one after the other; with none, Read gives them
	// until it returns false.
	Prompts []string
	Read    func() (string, bool)
	// Sig carries Ctrl-C and SIGTERM: the first Ctrl-C cancels the turn,
	// a second one or SIGTERM leaves.
	Sig <-chan os.Signal
	// End ends the session when done, instead of leaving it to pause.
	End bool
}

// Run opens the session, runs the prompts and leaves: the server pauses
// the session (or, with End, ends it). It then says where the session
// stands, as a local run does, with the --server form of the command that
// continues it.
func (t *Terminal) Run(ctx context.Context) error {
	if t.Agent == "" {
		return &exitcode.Error{Code: 2, Err: errors.New("--server needs --agent: the agent whose session to run")}
	}
	// Until the session is open, a signal gives up.
	openCtx, giveUp := context.WithCancel(ctx)
	opened := make(chan struct{})
	watched := make(chan struct{})
	defer func() { giveUp(); <-watched }()
	go func() {
		defer close(watched)
		select {
		case <-t.Sig:
			giveUp()
		case <-opened:
		case <-openCtx.Done():
		}
	}()
	if t.Continue {
		id, err := t.Client.LastPaused(openCtx, t.Agent)
		if err != nil {
			return err
		}
		t.Session = id
	}
	t.Term.Busy("connecting")
	conn, err := t.Client.DialACP(openCtx, t.Agent)
	if err != nil {
		t.Term.Idle()
		return err
	}
	cc := client.NewConn(conn, conn, t.Term)
	cc.Info = client.BlaiseAgent()
	connCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	defer func() { cancel(); <-ran }()
	go func() {
		defer close(ran)
		_ = cc.Run(connCtx)
	}()
	defer conn.Close()
	cwd, _ := os.Getwd()
	if t.Session != "" {
		// Loaded where it was opened, as a local run loads it.
		if rec, err := t.Client.Session(openCtx, t.Session); err == nil && rec.CWD != "" {
			cwd = rec.CWD
		}
	}
	t.Term.Relabel("attaching")
	sid, err := cc.Open(openCtx, t.Term.Capabilities(), cwd, t.Session)
	close(opened)
	t.Term.Idle()
	if err != nil {
		return err
	}
	if t.Session != "" {
		t.Term.EndTurn("end_turn") // the replayed history ends where the new turn starts
	}
	t.Term.Log(fmt.Sprintf("session %s on %s", sid, t.Client.URL))
	next := t.Read
	if len(t.Prompts) > 0 {
		prompts := t.Prompts
		next = func() (string, bool) {
			if len(prompts) == 0 {
				return "", false
			}
			p := prompts[0]
			prompts = prompts[1:]
			return p, true
		}
	}
	left := false // during a turn
	var unanswered error
	for !left {
		text, ok := next()
		if !ok {
			break
		}
		if left, err = t.Term.Turn(cc, sid, text, t.Sig, nil); err != nil {
			if !errors.Is(err, client.ErrCancelled) && !client.RunEnded(err) {
				return err
			}
			// Said once the session is settled, with where it stands.
			unanswered = err
			break
		}
	}
	var rec *lifecycle.Record
	if t.End {
		if rec, err = t.Client.End(ctx, sid); err != nil {
			return err
		}
	} else {
		// Leaving stops the run as idle (L9): it pauses, or ends under the
		// end policy.
		conn.Close()
		if rec, err = t.settled(ctx, sid); err != nil {
			return err
		}
	}
	resume := fmt.Sprintf("blaise-agent run --server %s --agent %s", t.Client.URL, t.Agent)
	if err := termrun.Describe(rec, rec.Settings, resume); err != nil {
		return &exitcode.Error{Code: 1, Err: err}
	}
	if unanswered != nil {
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("session %s: the turn was not answered: %w", sid, unanswered)}
	}
	if left {
		return client.ErrLeft
	}
	return nil
}

// settled waits until session id has settled after its client left:
// paused, or over, or tearing down after a teardown that failed (a retry
// is due). A signal leaves it to settle on its own.
func (t *Terminal) settled(ctx context.Context, id string) (*lifecycle.Record, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := t.Client.Session(ctx, id)
		if err != nil {
			return nil, err
		}
		switch rec.State {
		case lifecycle.Paused, lifecycle.Ended, lifecycle.Orphaned:
			return rec, nil
		case lifecycle.TearingDown:
			if rec.Teardown.Attempts > 0 {
				return rec, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.Sig:
			fmt.Fprintf(os.Stderr, "\nleft; session %s settles on its own (see blaise-agent sessions --server %s)\n", id, t.Client.URL)
			return nil, &exitcode.Error{Code: 130, Err: errors.New("interrupted")}
		case <-tick.C:
		}
	}
}
