package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"github.com/mattn/go-isatty"
)

// SessionsDoCmd is `sessions do ID ACTION [ARGS]`: an action a plug of
// the session offers (docs/plugs.md#actions).
type SessionsDoCmd struct {
	StateFlags
	ID     string   `arg:"" help:"The session id." predictor:"session"`
	Action string   `arg:"" help:"The action: NAME, or ID.NAME when several plugs offer NAME (sessions show lists them)." predictor:"action"`
	Args   []string `arg:"" optional:"" passthrough:"" help:"The action's arguments: --NAME (true), --no-NAME (false), --NAME VALUE, --NAME=VALUE or NAME=VALUE; the action's schema reads them."`
	ActionFlags
}

// ActionFlags are the flags of every command that does an action.
type ActionFlags struct {
	JSON bool `name:"json" help:"Print the value the action returned as JSON on stdout, after its output."`
	End  bool `help:"When the action offers to end the session (a merge), end it without asking."`
}

// Run does the action.
func (c *SessionsDoCmd) Run(g *Globals) error {
	args, err := chain.ActionArgs(c.Args)
	if err != nil {
		return err
	}
	return c.ActionFlags.act(g, c.StateFlags, c.ID, c.Action, args)
}

// SessionsDiffCmd is `sessions diff ID`: the action diff.
type SessionsDiffCmd struct {
	StateFlags
	ID   string `arg:"" help:"The session id." predictor:"session"`
	Stat bool   `help:"A summary of the changed files instead of the diff."`
	ActionFlags
}

// Run does the action diff.
func (c *SessionsDiffCmd) Run(g *Globals) error {
	return c.ActionFlags.act(g, c.StateFlags, c.ID, "diff", map[string]any{"stat": c.Stat})
}

// SessionsMergeCmd is `sessions merge ID`: the action merge.
type SessionsMergeCmd struct {
	StateFlags
	ID     string `arg:"" help:"The session id." predictor:"session"`
	Squash bool   `help:"Merge the session's changes as one new commit."`
	ActionFlags
}

// Run does the action merge.
func (c *SessionsMergeCmd) Run(g *Globals) error {
	return c.ActionFlags.act(g, c.StateFlags, c.ID, "merge", map[string]any{"squash": c.Squash})
}

// SessionsCheckoutCmd is `sessions checkout ID`: the action checkout,
// and with --shell a shell in the path it returned.
type SessionsCheckoutCmd struct {
	StateFlags
	ID    string `arg:"" help:"The session id." predictor:"session"`
	Shell bool   `help:"Open $SHELL (else sh) in the worktree; the session stays as it is when it exits."`
}

// Run does the action checkout, then opens the shell.
func (c *SessionsCheckoutCmd) Run(g *Globals) error {
	e, err := c.existingEngine(g)
	if err != nil {
		return err
	}
	if e == nil {
		return c.noSession(c.ID)
	}
	out := io.Writer(os.Stdout)
	if c.Shell {
		out = io.Discard
	}
	res, err := e.Act(context.Background(), c.ID, "checkout", nil, out)
	if err != nil || !c.Shell {
		return err
	}
	var result struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(res.Result, &result); err != nil || result.Path == "" {
		return fmt.Errorf("session %s: the action checkout returned no path to open a shell in", c.ID)
	}
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "sh"
	}
	fmt.Fprintf(os.Stderr, "a shell in %s; exit it to come back\n", result.Path)
	cmd := exec.Command(shell)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = result.Path, os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// act does the action, printing its output as it comes, then offers to
// end the session when the action's result asks it to (offer_end).
func (f ActionFlags) act(g *Globals, sf StateFlags, id, action string, args map[string]any) error {
	e, err := sf.existingEngine(g)
	if err != nil {
		return err
	}
	if e == nil {
		return sf.noSession(id)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := e.Act(ctx, id, action, raw, os.Stdout)
	if err != nil {
		return err
	}
	if f.JSON {
		out := res.Result
		if out == nil {
			out = json.RawMessage("null")
		}
		fmt.Printf("%s\n", out)
	}
	var result struct {
		OfferEnd string `json:"offer_end"`
	}
	_ = json.Unmarshal(res.Result, &result) // a result of another shape offers nothing
	if result.OfferEnd == "" {
		return nil
	}
	if !f.End && !confirmEnd(id, result.OfferEnd) {
		fmt.Fprintf(os.Stderr, "%s; end the session with: blaise-agent sessions end %s\n", result.OfferEnd, id)
		return nil
	}
	rec, err := e.End(context.Background(), id)
	if err != nil {
		return err
	}
	return printEnded(rec)
}

// confirmEnd asks the person at a terminal whether to end the session;
// without one, the answer is no.
func confirmEnd(id, why string) bool {
	if !isatty.IsTerminal(os.Stdin.Fd()) || !isatty.IsTerminal(os.Stderr.Fd()) {
		return false
	}
	fmt.Fprintf(os.Stderr, "%s. End session %s now (its plugs tear down)? [y/N] ", why, id)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}

// showActions writes what sessions show adds for actions: the summary of
// the session's changes and the actions its configuration offers.
func showActions(rec *lifecycle.Record) error {
	var cfg *interp.Config
	var err error
	if rec.State != lifecycle.Ended {
		cfg, err = chain.LoadConfig(rec.Config, log.New(io.Discard))
	}
	return sessionview.Actions(os.Stdout, rec, cfg, err)
}
