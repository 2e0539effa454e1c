package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// SessionsForkCmd is `sessions fork ID`: a new session whose environment
// starts from a paused session's as it is now (docs/sessions.md#forks).
type SessionsForkCmd struct {
	StateFlags
	ServerFlags
	ID   string `arg:"" help:"The session to fork: a paused one." predictor:"session"`
	JSON bool   `name:"json" help:"Print the fork's record as JSON on stdout instead of its id."`
}

// Run forks the session, prints the fork's id (or its record), and says
// on stderr how to continue it and whether its conversation with the
// agent is a fork of the parent's or a fresh one.
func (c *SessionsForkCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, fresh, err := c.fork(ctx, g)
	if err != nil {
		return err
	}
	if c.JSON {
		err = printJSON(rec)
	} else {
		_, err = fmt.Println(rec.ID)
	}
	if fresh != "" {
		fmt.Fprintf(os.Stderr, "the fork's conversation with the agent starts afresh: %s\n", fresh)
	}
	run := "blaise-agent run"
	if c.Server != "" {
		run += " --server " + c.Server + " --agent " + rec.AgentName
	}
	fmt.Fprintf(os.Stderr, "session %s is a fork of %s, paused; continue it with: %s --session %s\n", rec.ID, c.ID, run, rec.ID)
	return err
}

// fork forks the session, locally or on its server (where its runner
// makes the fork), and returns the fork and why its conversation with the
// agent starts afresh ("" when it is a fork of the parent's).
func (c *SessionsForkCmd) fork(ctx context.Context, g *Globals) (*lifecycle.Record, string, error) {
	if c.Server != "" {
		out, err := c.client().Fork(ctx, c.ID)
		if err != nil {
			return nil, "", err
		}
		return out.Session, out.Fresh, nil
	}
	e, err := c.existingEngine(g)
	if err != nil {
		return nil, "", err
	}
	if e == nil {
		return nil, "", c.noSession(c.ID)
	}
	var fresh string
	rec, err := e.Fork(ctx, c.ID, func(l *engine.Live) error {
		var err error
		fresh, err = openFork(ctx, e, l, c.ID)
		return err
	})
	return rec, fresh, err
}

// openFork opens the ACP session of the fork's first run l
// (client.OpenForkOf), parent's record read under the lock Fork holds.
func openFork(ctx context.Context, e *engine.Engine, l *engine.Live, parent string) (fresh string, err error) {
	prec, err := e.Store.Session(ctx, parent)
	if err != nil {
		return "", err
	}
	r, w := l.Stream()
	return client.OpenForkOf(ctx, r, w, prec)
}
