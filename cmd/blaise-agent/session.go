package main

import (
	"encoding/json"
	"os"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/interp"
)

// SessionProcessCmd is the hidden `blaise-agent session-process`: one run of
// one session, started by a front end, with ACP on stdin and stdout and the
// control channel on file descriptor 3. On the file store it inherits the
// session's run lock on file descriptor 4 and holds it until it exits; a
// runner's session process has its store on --store-fd instead, or on
// connections to --store-server.
type SessionProcessCmd struct {
	StateDir     string        `xor:"store" required:"" help:"The state directory." type:"path"`
	StoreFD      int           `xor:"store" required:"" help:"The file descriptor of the run's store connection (a runner's session process); with --store-server, of the run's ticket."`
	StoreServer  string        `help:"The server whose connections the run's store is on, with the ticket on --store-fd (a runner of protocol 7)." placeholder:"URL"`
	Session      string        `required:"" help:"The session id."`
	Kind         string        `required:"" enum:"start,resume,teardown,action" help:"The kind of run."`
	Number       int           `name:"run" required:"" help:"The run's number in the session."`
	EndReason    string        `help:"Why the session ended (teardown runs)."`
	Config       string        `help:"The configuration to load instead of the session's (a runner's own)." type:"path"`
	Carry        bool          `help:"Send the messages toward the client in the transcript's records on the store, not on stdout (a runner of protocol version 4 or later)."`
	Bundled      bool          `help:"Send the agent's session/update notifications on stdout in bundles, with the session's id (a front end that passes them on as they are)."`
	Agent        []string      `help:"The agent's command, then its arguments, one per flag: replaces the configuration's agent." sep:"none"`
	StopGrace    time.Duration `help:"How long a handler still attaching when the run is stopped may take to reach next() (default 10s)."`
	PlugTime     time.Time     `help:"Make time.now() of the plugs start at this time (RFC 3339) plus an hour per run, one second per reading, and name the directories of host.fs.mkdtemp by count (blaise-agent test)." format:"2006-01-02T15:04:05Z07:00"`
	FallbackFrom string        `help:"Files below this directory find the files they reference that are missing there relative to --fallback-to instead (blaise-agent test: a test's own configuration reaches the plugs beside the test file)." type:"path"`
	FallbackTo   string        `help:"See --fallback-from." type:"path"`

	Action     string `help:"The action of an action run: NAME or ID.NAME."`
	ActionArgs string `help:"The action's arguments, a JSON object (action runs)."`
}

// Run serves the run.
func (c *SessionProcessCmd) Run(g *Globals) error {
	// The log passes through the run's redaction (blaise:secrets).
	redactions := new(redact.Registry)
	var fallback *interp.Fallback
	if c.FallbackFrom != "" {
		fallback = &interp.Fallback{From: c.FallbackFrom, To: c.FallbackTo}
	}
	return chain.ServeInherited(&chain.SessionProcess{
		SessionID:  c.Session,
		Kind:       lifecycle.Kind(c.Kind),
		Run:        c.Number,
		EndReason:  lifecycle.Reason(c.EndReason),
		Action:     c.Action,
		ActionArgs: json.RawMessage(c.ActionArgs),
		Logger:     g.LoggerTo(redactions.Writer(os.Stderr)).With("session", c.Session),
		Redactions: redactions,
		Agent:      c.Agent,
		Config:     c.Config,
		Carry:      c.Carry,
		Bundled:    c.Bundled,
		StopGrace:  c.StopGrace,
		PlugTime:   c.PlugTime,
		Fallback:   fallback,
	}, c.StateDir, c.StoreFD, c.StoreServer)
}
