package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// SessionsForkCmd is `sessions fork ID`: a new session whose environment
// starts from a paused session's as it is now (docs/sessions.md#forks).
type SessionsForkCmd struct {
	StateFlags
	ID   string `arg:"" help:"The session to fork: a paused one." predictor:"session"`
	JSON bool   `name:"json" help:"Print the fork's record as JSON on stdout instead of its id."`
}

// Run forks the session, prints the fork's id (or its record), and says
// on stderr how to continue it and whether its conversation with the
// agent is a fork of the parent's or a fresh one.
func (c *SessionsForkCmd) Run(g *Globals) error {
	e, err := c.existingEngine(g)
	if err != nil {
		return err
	}
	if e == nil {
		return c.noSession(c.ID)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var fresh string // why the fork's conversation starts afresh
	rec, err := e.Fork(ctx, c.ID, func(l *engine.Live) error {
		var err error
		fresh, err = openFork(ctx, e, l, c.ID)
		return err
	})
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
	fmt.Fprintf(os.Stderr, "session %s is a fork of %s, paused; continue it with: blaise-agent run --session %s\n", rec.ID, c.ID, rec.ID)
	return err
}

// openFork opens the ACP session of the fork's first run l: a fork of the
// parent's conversation (session/fork) when the agent offers it, else a
// new one; fresh says why when it is new.
func openFork(ctx context.Context, e *engine.Engine, l *engine.Live, parent string) (fresh string, err error) {
	prec, err := e.Store.Session(ctx, parent)
	if err != nil {
		return "", err
	}
	r, w := l.Stream()
	conn := client.NewConn(r, w, nil)
	connCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	// Ends with connCtx, cancelled as openFork returns.
	go func() { defer close(ran); _ = conn.Run(connCtx) }()
	defer func() { cancel(); r.Close(); <-ran }()
	init, err := conn.Initialize(ctx, map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if err != nil {
		return "", err
	}
	cwd := prec.CWD
	if cwd == "" {
		cwd = prec.Dir
	}
	_, forked, err := conn.OpenFork(ctx, init, prec.ACPSessionID, cwd, prec.MCPServers)
	switch {
	case err != nil:
		return "", err
	case forked:
		return "", nil
	case prec.ACPSessionID == "":
		return fmt.Sprintf("session %s has no conversation with its agent to fork", parent), nil
	}
	return fmt.Sprintf("its agent does not offer session/fork (ACP); session %s keeps its own", parent), nil
}
