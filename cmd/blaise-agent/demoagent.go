package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
)

// DemoAgentCmd is `blaise-agent demo-agent`.
type DemoAgentCmd struct {
	StateDir string `help:"Where sessions are kept so that a later process can load them (default: $XDG_STATE_HOME/blaise-demo-agent, else blaise-demo-agent in the temporary directory)." type:"path" placeholder:"DIR"`
	Name     string `help:"The agent name sent in the initialize response." default:"blaise-demo-agent"`
	Fork     bool   `help:"Offer session/fork (sessionCapabilities.fork in the answer to initialize): a copy of a stored session's history in a new session."`
	Script   string `help:"A file holding a JSON array of strings: the n-th prompt runs the n-th string in the prompt language instead of its own text (blaise-agent test scripts its agent so)." type:"existingfile" placeholder:"FILE"`
}

// Run serves ACP on stdin and stdout until stdin closes.
func (c *DemoAgentCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := demoagent.Options{StateDir: c.StateDir, Name: c.Name, Log: os.Stderr, Fork: c.Fork}
	if c.Script != "" {
		data, err := os.ReadFile(c.Script)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &opts.Script); err != nil {
			return fmt.Errorf("--script %s: want a JSON array of strings: %w", c.Script, err)
		}
	}
	err := demoagent.Run(ctx, os.Stdin, os.Stdout, opts)
	var exit demoagent.ErrExit
	if errors.As(err, &exit) {
		os.Exit(exit.Code)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
