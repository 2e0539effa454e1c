package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
)

// SessionsCmd is `blaise-agent sessions`.
type SessionsCmd struct {
	List    SessionsListCmd    `cmd:"" default:"withargs" help:"List sessions with their state and age."`
	End     SessionsEndCmd     `cmd:"" help:"End a paused session now: its plugs tear down (reason closed)."`
	Sweep   SessionsSweepCmd   `cmd:"" help:"Tear down expired sessions, retry due teardowns, and settle runs whose process died."`
	Resolve SessionsResolveCmd `cmd:"" help:"Mark an orphaned session ended once you cleaned up what its plugs left behind."`
}

// SessionsListCmd lists sessions.
type SessionsListCmd struct {
	StateFlags
	All bool `help:"Include ended sessions."`
}

// Run prints the table.
func (c *SessionsListCmd) Run(g *Globals) error {
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	recs, err := e.Store.Sessions()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATE\tAGE\tRUNS\tLAST PAUSE\tCONFIG")
	now := time.Now()
	for _, r := range recs {
		if r.State == blaise.Ended && !c.All {
			continue
		}
		pause := "-"
		if r.Pause != nil {
			pause = r.Pause.Reason
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.State, now.Sub(r.Created).Round(time.Second), r.Runs, pause, r.Config)
		if r.State == blaise.Orphaned {
			fmt.Fprintf(w, "\t\t\t\t\t  teardown failed %d times: %s\n", r.Teardown.Attempts, r.Teardown.LastError)
		}
	}
	return w.Flush()
}

// SessionsEndCmd ends a session.
type SessionsEndCmd struct {
	StateFlags
	ID string `arg:"" help:"The session id."`
}

// Run ends the session and reports its state.
func (c *SessionsEndCmd) Run(g *Globals) error {
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	rec, err := e.End(context.Background(), c.ID)
	if err != nil {
		return err
	}
	return printState(rec)
}

// SessionsSweepCmd settles sessions at rest.
type SessionsSweepCmd struct {
	StateFlags
}

// Run sweeps.
func (c *SessionsSweepCmd) Run(g *Globals) error {
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	return e.Sweep(context.Background())
}

// SessionsResolveCmd resolves an orphaned session.
type SessionsResolveCmd struct {
	StateFlags
	ID string `arg:"" help:"The session id."`
}

// Run resolves the session.
func (c *SessionsResolveCmd) Run(g *Globals) error {
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	rec, err := e.Resolve(c.ID)
	if err != nil {
		return err
	}
	return printState(rec)
}

func printState(rec *blaise.SessionRecord) error {
	switch rec.State {
	case blaise.Ended:
		fmt.Printf("session %s ended (%s)\n", rec.ID, rec.EndReason)
	case blaise.Orphaned, blaise.TearingDown:
		fmt.Printf("session %s is %s: teardown failed %d times: %s\n", rec.ID, rec.State, rec.Teardown.Attempts, rec.Teardown.LastError)
	default:
		fmt.Printf("session %s is %s\n", rec.ID, rec.State)
	}
	return nil
}
