package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/terminal/termrun"
	"github.com/charmbracelet/log"
)

// RunCmd is `blaise-agent run`: a terminal ACP client of one session.
type RunCmd struct {
	ConfigFlag
	Session  string   `help:"Continue the paused session with this id: a resume run re-attaches the plugs and loads the ACP session." xor:"which" predictor:"session" placeholder:"ID" type:"session-id"`
	Continue bool     `help:"Continue the most recently paused session of this configuration (with --server: of the agent, among those opened with an API token of your token's name)." xor:"which"`
	Prompt   []string `arg:"" optional:"" help:"The prompt. Without one, an interactive prompt reads lines until end of input."`
	Yes      bool     `help:"Allow every permission request without asking, once (an allow_once option when one is offered, never a standing grant first)." xor:"answer"`
	No       bool     `help:"Deny every permission request without asking (a reject_once option when one is offered)." xor:"answer"`
	Raw      bool     `help:"Show the agent's messages as they come, without rendering their Markdown (as when stdout is not a terminal)."`
	End      bool     `help:"End the session (reason closed) when done, instead of stopping it as idle; also a session whose run failed. At the interactive prompt, /end does the same."`
	SessionFlags
	ServerFlags
	Agent string `help:"With --server: the agent whose session to run." placeholder:"NAME"`
}

// StateFlags locate the sessions.
type StateFlags struct {
	StateDir string `help:"Where sessions are kept (default: $XDG_STATE_HOME/blaise-agent, else ~/.local/state/blaise-agent)." type:"path" env:"BLAISE_STATE_DIR" placeholder:"DIR"`
}

// SessionFlags are the lifecycle settings of new sessions.
type SessionFlags struct {
	StateFlags
	IdlePolicy      string        `help:"What an idle session does: pause (keep the environment) or end (tear it down); default: session(...) of the configuration, else pause." enum:",pause,end" default:""`
	PausedLifetime  time.Duration `help:"How long a paused session waits before it is torn down (default 24h, capped by SESSION_MAX_PAUSED_LIFETIME_MS)." type:"setting"`
	InactivityLimit time.Duration `help:"How long a session may go without a message before it is idle (default 5m; never counts while a turn runs)." type:"setting"`
	Timeout         time.Duration `help:"The longest one run may take (default 30m)." type:"setting"`
	StartupLimit    time.Duration `help:"How long the agent may take to answer initialize before the run fails (default 1m)." env:"BLAISE_STARTUP_LIMIT" type:"setting"`
}

// engine returns the lifecycle engine with these settings.
func (f *SessionFlags) engine(g *Globals) (*engine.Engine, error) {
	e, err := f.StateFlags.engine(g)
	if err != nil {
		return nil, err
	}
	e.Settings = lifecycle.Settings{
		IdlePolicy:      lifecycle.IdlePolicy(f.IdlePolicy),
		PausedLifetime:  f.PausedLifetime,
		InactivityLimit: f.InactivityLimit,
		Timeout:         f.Timeout,
		StartupLimit:    f.StartupLimit,
	}
	return e, nil
}

// engine opens the store and returns the lifecycle engine.
func (f *StateFlags) engine(g *Globals) (*engine.Engine, error) {
	store, err := filestore.OpenStore(f.dir())
	if err != nil {
		return nil, err
	}
	self, err := chain.Self()
	if err != nil {
		return nil, err
	}
	return &engine.Engine{
		Store:   store,
		Command: []string{self, "session-process"},
		LogArgs: []string{"--log-level", g.LogLevel, "--log-format", g.LogFormat, "--color", g.childColor()},
		Log:     g.Logger(),
	}, nil
}

// Run runs the session in the terminal.
func (c *RunCmd) Run(g *Globals) error {
	if c.Server != "" {
		return c.runRemote(g)
	}
	if c.Session == "" {
		// The configuration of a new session (or the one to continue)
		// loads before anything else: a refused one is said once, before
		// a prompt shows or the state directory is made. Its print()s are
		// the session process's to show; what the plugs' resolver warns of
		// (a tag that moved) is said here, as the cache it fills has no
		// more to say when the session process loads.
		remote := pluglock.NewResolver(pluglock.Locked)
		remote.Warn = func(msg string) { g.Logger().Warn(msg) }
		if _, err := chain.LoadConfigWith(c.Config, log.New(io.Discard), remote); err != nil {
			return err
		}
	}
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	answer := ""
	switch {
	case c.Yes:
		answer = "allow"
	case c.No:
		answer = "deny"
	}
	return termrun.Run(context.Background(), termrun.Options{
		Engine: e, Config: c.Config, Session: c.Session, Continue: c.Continue, Prompt: c.Prompt,
		Answer: answer, Raw: c.Raw, End: c.End, Color: g.color(), Log: g.Logger(),
	})
}

// runRemote is run --server: a session of a server's agent.
func (c *RunCmd) runRemote(g *Globals) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	interrupt := func() {
		select {
		case sig <- os.Interrupt:
		default:
		}
	}
	in, err := client.NewInput(os.Stdin, os.Stderr, "", interrupt)
	if err != nil {
		return err
	}
	defer in.Close()
	term := termrun.NewTerminal(g.color(), c.Raw, in)
	switch {
	case c.Yes:
		term.Default = "allow"
	case c.No:
		term.Default = "deny"
	}
	t := &apiclient.Terminal{
		Client: c.client(), Agent: c.Agent, Term: term, Session: c.Session, Continue: c.Continue, Prompts: c.Prompt, Sig: sig, End: c.End,
		Read: func() (string, bool) {
			line, err := in.ReadLine(context.Background(), "> ")
			return line, err == nil
		},
	}
	return t.Run(context.Background())
}
