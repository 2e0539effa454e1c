package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/blaiseagent/blaise-agent/session"
)

// SessionProcessCmd is the hidden `blaise-agent session-process`: one run of
// one session, started by a front end, with ACP on stdin and stdout and the
// control channel on file descriptor 3. It inherits the session's run lock
// on file descriptor 4 and holds it until it exits.
type SessionProcessCmd struct {
	StateDir  string        `required:"" help:"The state directory." type:"path"`
	Session   string        `required:"" help:"The session id."`
	Kind      string        `required:"" enum:"start,resume,teardown" help:"The kind of run."`
	Number    int           `name:"run" required:"" help:"The run's number in the session."`
	EndReason string        `help:"Why the session ended (teardown runs)."`
	Agent     []string      `help:"The agent's command, then its arguments, one per flag: replaces the configuration's agent." sep:"none"`
	StopGrace time.Duration `help:"How long a handler still attaching when the run is stopped may take to reach next() (default 10s)."`
}

// Run serves the run.
func (c *SessionProcessCmd) Run(g *Globals) error {
	logger := g.Logger().With("session", c.Session)
	store, err := blaise.OpenStore(c.StateDir)
	if err != nil {
		return err
	}
	// The control channel and the run lock are the front end's and ours:
	// the agent and the plugs' processes must not inherit them.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(blaise.RunLockFD)
	ctl := os.NewFile(3, "control")
	// Interrupts are the front end's to handle; SIGTERM shuts the session down.
	signal.Ignore(os.Interrupt)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	sp := &runner.SessionProcess{
		Store:     store,
		SessionID: c.Session,
		Kind:      session.Kind(c.Kind),
		Run:       c.Number,
		EndReason: session.Reason(c.EndReason),
		ACPIn:     os.Stdin,
		ACPOut:    os.Stdout,
		Control:   blaise.NewControlConn(ctl, ctl),
		Logger:    logger,
		Agent:     c.Agent,
		StopGrace: c.StopGrace,
	}
	return sp.Serve(ctx)
}
