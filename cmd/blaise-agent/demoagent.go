package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/demoagent"
)

// DemoAgentCmd is `blaise-agent demo-agent`.
type DemoAgentCmd struct {
	StateDir string `help:"Where sessions are kept so that a later process can load them (default: $XDG_STATE_HOME/blaise-agent/demo-agent)." type:"path"`
	Name     string `help:"The agent name sent in the initialize response." default:"blaise-demo-agent"`
}

// Run serves ACP on stdin and stdout until stdin closes.
func (c *DemoAgentCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := demoagent.Run(ctx, os.Stdin, os.Stdout, demoagent.Options{StateDir: c.StateDir, Name: c.Name, Log: os.Stderr})
	var exit demoagent.ErrExit
	if errors.As(err, &exit) {
		os.Exit(exit.Code)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
