// Package termrun is one `blaise-agent run` in the terminal: a session
// started or continued, its prompts (given, or read at an interactive
// prompt), permission requests asked of the person, Ctrl-C (cancel the
// turn, then leave), and at the end a stop and a report of where the
// session stands, whose error gives the exit status.
package termrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/charmbracelet/log"
	"github.com/mattn/go-isatty"
)

// Options are a run's flags and its engine.
type Options struct {
	Engine *engine.Engine
	Config string // the configuration of a new session
	// Session continues the paused session with this id; Continue, the one
	// of Config paused last.
	Session  string
	Continue bool
	Prompt   []string // none: read prompts at an interactive prompt
	// Answer answers every permission request: "allow" or "deny"; "" asks
	// the person.
	Answer string
	Raw    bool // the agent's messages as they come, not rendered
	// End ends the session when done, instead of stopping it as idle.
	End   bool
	Color client.ColorMode
	Log   *log.Logger
}

// Run runs the session.
func Run(ctx context.Context, o Options) error {
	e := o.Engine
	// Signals are watched from here to the end: no moment of the run is
	// deaf to Ctrl-C or SIGTERM.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	sweep, interrupted := untilSignal(ctx, sig)
	err := e.Sweep(sweep)
	if interrupted() {
		return errInterrupted
	}
	if err != nil {
		o.Log.Warn("settling earlier sessions", "err", err)
	}
	interactive := len(o.Prompt) == 0
	// Ctrl-C read by the line editor, as the signal it stands for.
	interrupt := func() {
		select {
		case sig <- os.Interrupt:
		default:
		}
	}
	in, err := client.NewInput(os.Stdin, os.Stderr, filepath.Join(e.Store.(*filestore.Store).Dir(), historyFile), interrupt)
	if err != nil {
		return err
	}
	defer in.Close()
	term := NewTerminal(o.Color, o.Raw, in)
	if cwd, err := os.Getwd(); err == nil {
		term.Root = cwd
	}
	if isatty.IsTerminal(os.Stderr.Fd()) {
		// The session process's log joins the terminal's output, each
		// line of its own (it would otherwise cut into the agent's).
		w, drain, err := logsThrough(term)
		if err != nil {
			return err
		}
		defer drain()
		e.Stderr = w
	}
	// The session's process starts while the terminal is made ready.
	e.Spare = engine.NewSpare(e)
	defer e.Spare.Drop()
	if err := e.Spare.Start(); err != nil {
		o.Log.Debug("no spare session process", "err", err)
	}
	e.OnAttach = func(_, plug string) {
		if plug == "" {
			term.Relabel("starting the agent")
		} else {
			term.Relabel("attaching: " + plug)
		}
	}
	switch {
	case o.Answer != "":
		term.Default = o.Answer
	case isatty.IsTerminal(os.Stdin.Fd()) || interactive:
		term.Ask = func(ctx context.Context, q string) (string, error) {
			line, err := in.ReadLine(ctx, q)
			if errors.Is(err, client.ErrInterrupted) {
				interrupt() // cancels the turn
				return "", io.EOF
			}
			return line, err
		}
	}

	id := o.Session
	if o.Continue {
		if id, err = lastPaused(ctx, e, o.Config); err != nil {
			return err
		}
	}
	t := &terminalRun{ctx: ctx, opts: o, e: e, term: term, sig: sig, in: in}
	e.OnLaunch = func(id string, run int, kind lifecycle.Kind) {
		// Before the run's plugs can log a line.
		if kind == lifecycle.StartRun || kind == lifecycle.ResumeRun {
			t.launched = id
			term.Log(fmt.Sprintf("session %s (run %d)", id, run))
		}
	}
	defer t.close()
	return t.run(id, interactive)
}

// historyFile, in the state directory, keeps the prompts typed at the
// interactive prompt across runs.
const historyFile = "history"

// NewTerminal returns the terminal's renderer: Markdown rendered and a
// spinner when stdout is a terminal (not with raw), styles as color says.
func NewTerminal(color client.ColorMode, raw bool, in client.Input) *client.Terminal {
	term := &client.Terminal{Out: in.Wrap(os.Stdout), Err: in.Wrap(os.Stderr), Color: color.Styled(os.Stdout)}
	if client.Capable(os.Stdout) {
		term.Markdown = !raw
		term.Width = client.Columns(os.Stdout)
		if client.Capable(os.Stderr) {
			term.Status = os.Stderr
		}
	}
	return term
}

// logsThrough returns the write end of a pipe whose lines term writes as
// log lines, and a function that closes it and waits, a moment at most,
// for the lines still coming.
func logsThrough(term *client.Terminal) (*os.File, func(), error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("the session's log: %w", err)
	}
	done := make(chan struct{})
	// Ends with the log's pipe; the returned func waits for it, logLinger at most.
	go func() {
		defer close(done)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			term.Log(sc.Text())
		}
	}()
	return w, func() {
		w.Close()
		// A session process settling on its own keeps writing; its
		// lines after this are lost rather than waited for.
		select {
		case <-done:
		case <-time.After(logLinger):
		}
	}, nil
}

// logLinger is how long run waits at its end for the log lines of session
// processes that have not exited.
const logLinger = time.Second
