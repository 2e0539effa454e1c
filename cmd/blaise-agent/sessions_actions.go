package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"github.com/mattn/go-isatty"
)

// SessionsDoCmd is `sessions do ID ACTION [ARGS]`: an action a plug of
// the session offers (docs/plugs.md#actions).
type SessionsDoCmd struct {
	StateFlags
	ServerFlags
	ID     string   `arg:"" help:"The session id." predictor:"session"`
	Action string   `arg:"" help:"The action: NAME, or ID.NAME when several plugs offer NAME (sessions show lists them)." predictor:"action"`
	Args   []string `arg:"" optional:"" passthrough:"" help:"The action's arguments: --NAME (true), --no-NAME (false), --NAME VALUE, --NAME=VALUE or NAME=VALUE; the action's schema reads them."`
	ActionFlags
}

// ActionFlags are the flags of every command that does an action.
type ActionFlags struct {
	JSON bool `name:"json" help:"Print the value the action returned as JSON, alone on stdout (the action's output goes to stderr)."`
	End  bool `help:"When the action offers to end the session (a merge), end it without asking."`
}

// Run does the action.
func (c *SessionsDoCmd) Run(g *Globals) error {
	if err := ownFlagAmongArgs(c.Args); err != nil {
		return err
	}
	args, err := chain.ActionArgs(c.Args)
	if err != nil {
		return err
	}
	return c.ActionFlags.act(g, c.StateFlags, c.ServerFlags, c.ID, c.Action, args)
}

// SessionsDiffCmd is `sessions diff ID`: the action diff.
type SessionsDiffCmd struct {
	StateFlags
	ServerFlags
	ID   string `arg:"" help:"The session id." predictor:"session"`
	Stat bool   `help:"A summary of the changed files instead of the diff."`
	ActionFlags
}

// Run does the action diff.
func (c *SessionsDiffCmd) Run(g *Globals) error {
	return c.ActionFlags.act(g, c.StateFlags, c.ServerFlags, c.ID, "diff", map[string]any{"stat": c.Stat})
}

// SessionsMergeCmd is `sessions merge ID`: the action merge.
type SessionsMergeCmd struct {
	StateFlags
	ServerFlags
	ID     string `arg:"" help:"The session id." predictor:"session"`
	Squash bool   `help:"Merge the session's changes as one new commit."`
	ActionFlags
}

// Run does the action merge.
func (c *SessionsMergeCmd) Run(g *Globals) error {
	return c.ActionFlags.act(g, c.StateFlags, c.ServerFlags, c.ID, "merge", map[string]any{"squash": c.Squash})
}

// SessionsCheckoutCmd is `sessions checkout ID`: the action checkout,
// and with --shell a shell in the path it returned.
type SessionsCheckoutCmd struct {
	StateFlags
	ServerFlags
	ID    string `arg:"" help:"The session id." predictor:"session"`
	Shell bool   `help:"Open $SHELL (else sh) in the worktree; the session stays as it is when it exits. Not with --server: the worktree is on the runner's machine."`
}

// Run does the action checkout, then opens the shell.
func (c *SessionsCheckoutCmd) Run(g *Globals) error {
	if c.Server != "" {
		return c.onServer()
	}
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

// onServer prints the path of the worktree of a server-hosted session,
// on its runner's machine.
func (c *SessionsCheckoutCmd) onServer() error {
	if c.Shell {
		return errors.New("--shell opens a shell in the worktree of a session of this machine; with --server the worktree is on the runner's machine: open a shell there")
	}
	ctx := context.Background()
	if _, err := c.client().Act(ctx, c.ID, "checkout", nil, os.Stdout); err != nil {
		return remoteActionError(err, c.ServerFlags, c.ID)
	}
	rec, err := c.client().Session(ctx, c.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "(a path on the machine of runner %s, where the session runs)\n", rec.Runner)
	return nil
}

// act does the action, printing its output as it comes, then offers to
// end the session when the action's result asks it to (offer_end).
func (f ActionFlags) act(g *Globals, sf StateFlags, srv ServerFlags, id, action string, args map[string]any) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var result json.RawMessage
	var end func(context.Context, string) (*lifecycle.Record, error)
	// With --json, stdout is the result's alone: what the action writes
	// goes to stderr.
	output := io.Writer(os.Stdout)
	if f.JSON {
		output = os.Stderr
	}
	if srv.Server != "" {
		res, err := srv.client().Act(ctx, id, action, args, output)
		if err != nil {
			return remoteActionError(err, srv, id)
		}
		result, end = res, srv.client().End
	} else {
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
		res, err := e.Act(ctx, id, action, raw, output)
		if err != nil {
			return err
		}
		result, end = res.Result, e.End
	}
	if f.JSON {
		out := result
		if out == nil {
			out = json.RawMessage("null")
		}
		fmt.Printf("%s\n", out)
	}
	var offer struct {
		OfferEnd string   `json:"offer_end"`
		Terminal []string `json:"terminal"`
	}
	_ = json.Unmarshal(result, &offer) // a result of another shape offers nothing
	if len(offer.Terminal) > 0 && srv.Server == "" && !f.JSON && atTerminal() {
		return runAtTerminal(offer.Terminal)
	}
	if offer.OfferEnd == "" {
		return nil
	}
	if !f.End && !confirmEnd(id, offer.OfferEnd) {
		server := ""
		if srv.Server != "" {
			server = "--server " + srv.Server + " "
		}
		fmt.Fprintf(os.Stderr, "%s; end the session with: blaise-agent sessions end %s%s\n", offer.OfferEnd, server, id)
		return nil
	}
	rec, err := end(context.Background(), id)
	if err != nil {
		return err
	}
	if f.JSON {
		return printEnded(os.Stderr, rec) // stdout is the result's alone
	}
	return printEnded(os.Stdout, rec)
}

// remoteActionError is err, of an action of a server-hosted session, with
// how to check what an action whose outcome is unknown did.
func remoteActionError(err error, srv ServerFlags, id string) error {
	if !errors.Is(err, apiclient.ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w; check what it did before you do it again: blaise-agent sessions show --server %s %s, and its changes (blaise-agent sessions diff --server %s %s) once its runner is back", err, srv.Server, id, srv.Server, id)
}

// atTerminal reports whether stdin and stdout are a terminal.
func atTerminal() bool {
	return isatty.IsTerminal(os.Stdin.Fd()) && isatty.IsTerminal(os.Stdout.Fd())
}

// runAtTerminal runs the command an action's result offers to run at the
// person's terminal (terminal: a shell in a container), attached to it.
func runAtTerminal(argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
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

// localActions is what sessions show adds for actions: the summary of the
// session's changes and the actions its configuration offers.
func localActions(rec *lifecycle.Record) func(io.Writer) {
	var cfg *interp.Config
	var err error
	if rec.State != lifecycle.Ended {
		cfg, err = chain.LoadConfig(rec.Config, log.New(io.Discard))
	}
	return sessionview.Actions(rec, cfg, err)
}

// ownFlagAmongArgs refuses a flag of sessions do itself given after the
// action, where it would be taken for one of the action's arguments and
// the command would run on another store.
func ownFlagAmongArgs(args []string) error {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if slices.Contains([]string{"--server", "--token", "--state-dir"}, name) {
			return &exitcode.Error{Code: 2, Err: fmt.Errorf("%s after the action would be one of its arguments: give it before the session id (blaise-agent sessions do %s … ID ACTION [ARGS])", name, name)}
		}
	}
	return nil
}
