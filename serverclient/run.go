package serverclient

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/blaiseagent/blaise-agent/client"
)

// Terminal is `run --server`: a session of a server's agent in the
// terminal, as `run` has a session of this machine.
type Terminal struct {
	Client  *Client
	Agent   string
	Term    *client.Terminal
	Session string // continue this paused session; "": a new one
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
// the session (or, with End, ends it).
func (t *Terminal) Run(ctx context.Context) error {
	if t.Agent == "" {
		return errors.New("--server needs --agent: the agent whose session to run")
	}
	// Until the session is open, a signal gives up.
	openCtx, giveUp := context.WithCancel(ctx)
	opened := make(chan struct{})
	go func() {
		select {
		case <-t.Sig:
			giveUp()
		case <-opened:
		}
	}()
	defer giveUp()
	t.Term.Busy("connecting")
	conn, err := t.Client.DialACP(openCtx, t.Agent)
	if err != nil {
		t.Term.Idle()
		return err
	}
	cc := client.NewConn(conn, conn, t.Term)
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = cc.Run(connCtx) }()
	defer conn.Close()
	cwd, _ := os.Getwd()
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
	for {
		text, ok := next()
		if !ok {
			break
		}
		left, err := t.Term.Turn(cc, sid, text, t.Sig, nil)
		if err != nil {
			return err
		}
		if left {
			return nil
		}
	}
	if t.End {
		rec, err := t.Client.End(ctx, sid)
		if err != nil {
			return err
		}
		t.Term.Log(fmt.Sprintf("session %s ended (%s)", rec.ID, rec.EndReason))
	}
	return nil
}
