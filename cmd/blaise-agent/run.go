package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/client"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/mattn/go-isatty"
)

// RunCmd is `blaise-agent run`: a terminal ACP client of one session.
type RunCmd struct {
	Config   string   `short:"c" help:"The configuration file." default:"blaise.star" type:"path"`
	Session  string   `help:"Continue the paused session with this id: a resume run re-attaches the plugs and loads the ACP session." xor:"which"`
	Continue bool     `help:"Continue the most recently paused session of this configuration." xor:"which"`
	Prompt   []string `arg:"" optional:"" help:"The prompt. Without one, an interactive prompt reads lines until end of input."`
	Yes      bool     `help:"Allow every permission request without asking." xor:"answer"`
	No       bool     `help:"Deny every permission request without asking." xor:"answer"`
	End      bool     `help:"End the session (reason closed) when done, instead of stopping it as idle."`
	SessionFlags
}

// StateFlags locate the sessions.
type StateFlags struct {
	StateDir string `help:"Where sessions are kept (default: $XDG_STATE_HOME/blaise-agent)." type:"path" env:"BLAISE_STATE_DIR"`
}

// SessionFlags are the lifecycle settings of new sessions.
type SessionFlags struct {
	StateFlags
	IdlePolicy      string        `help:"What an idle session does: pause (keep the environment) or end (tear it down); default: session(...) of the configuration, else pause." enum:",pause,end" default:""`
	PausedLifetime  time.Duration `help:"How long a paused session waits before it is torn down (default 24h, capped by SESSION_MAX_PAUSED_LIFETIME_MS)."`
	InactivityLimit time.Duration `help:"How long a session may go without a message before it is idle (default 5m; never counts while a turn runs)."`
	Timeout         time.Duration `help:"The longest one run may take (default 30m)."`
	StartupLimit    time.Duration `help:"How long the agent may take to answer initialize before the run fails (default 1m)." env:"BLAISE_STARTUP_LIMIT"`
}

// engine returns the lifecycle engine with these settings.
func (f *SessionFlags) engine(g *Globals) (*blaise.Engine, error) {
	e, err := f.StateFlags.engine(g)
	if err != nil {
		return nil, err
	}
	e.Settings = blaise.Settings{
		IdlePolicy:      blaise.IdlePolicy(f.IdlePolicy),
		PausedLifetime:  f.PausedLifetime,
		InactivityLimit: f.InactivityLimit,
		Timeout:         f.Timeout,
		StartupLimit:    f.StartupLimit,
	}
	return e, nil
}

// engine opens the store and returns the lifecycle engine.
func (f *StateFlags) engine(g *Globals) (*blaise.Engine, error) {
	dir := f.StateDir
	if dir == "" {
		dir = blaise.DefaultStateDir()
	}
	store, err := blaise.OpenStore(dir)
	if err != nil {
		return nil, err
	}
	self, err := runner.Self()
	if err != nil {
		return nil, err
	}
	return &blaise.Engine{
		Store:   store,
		Command: []string{self, "session-process"},
		LogArgs: []string{"--log-level", g.LogLevel, "--log-format", g.LogFormat},
		Log:     g.Logger(),
	}, nil
}

// Run runs the session.
func (c *RunCmd) Run(g *Globals) error {
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := e.Sweep(ctx); err != nil {
		g.Logger().Warn("settling earlier sessions", "err", err)
	}
	interactive := len(c.Prompt) == 0
	term := &client.Terminal{Out: os.Stdout, Err: os.Stderr, Color: isatty.IsTerminal(os.Stdout.Fd()) && os.Getenv("NO_COLOR") == ""}
	if cwd, err := os.Getwd(); err == nil {
		term.Root = cwd
	}
	// One reader of stdin for prompts and permission answers alike.
	lines := readLines(os.Stdin)
	switch {
	case c.Yes:
		term.Default = "allow"
	case c.No:
		term.Default = "deny"
	case isatty.IsTerminal(os.Stdin.Fd()) || interactive:
		term.Ask = func(ctx context.Context, q string) (string, error) {
			fmt.Fprint(os.Stderr, q)
			select {
			case line, ok := <-lines:
				if !ok {
					return "", io.EOF
				}
				return line, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	var lastInterrupt time.Time

	id := c.Session
	if c.Continue {
		if id, err = lastPaused(e, c.Config); err != nil {
			return err
		}
	}
	var s *attached
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	for first := true; ; first = false {
		var prompt string
		if interactive {
			fmt.Fprint(os.Stderr, "> ")
			var line string
			var ok bool
			select {
			case line, ok = <-lines:
			case <-sig:
				// Ctrl-C at the prompt leaves; right after one that
				// cancelled a turn, it ends the session.
				ok = false
				if s != nil && !s.ended() && time.Since(lastInterrupt) < doubleInterrupt {
					fmt.Fprintln(os.Stderr, "\nending the session")
					_ = s.live.Stop("closed", false)
					c.report(e, s)
					return nil
				}
			}
			if !ok {
				fmt.Fprintln(os.Stderr)
				break // the person left (L9)
			}
			prompt = strings.TrimRight(line, "\r\n")
			if strings.TrimSpace(prompt) == "" {
				continue
			}
		} else {
			if !first {
				break
			}
			prompt = strings.Join(c.Prompt, " ")
		}
		if s == nil || s.ended() {
			// The first prompt, or the session paused while the person
			// was away: (re)attach.
			if s != nil {
				s.close()
			}
			if s, err = c.attach(ctx, e, term, id); err != nil {
				return err
			}
			id = s.live.ID
		}
		// An interrupt typed at the prompt is not meant for the turn.
		for len(sig) > 0 {
			<-sig
		}
		err := s.prompt(ctx, prompt, sig)
		lastInterrupt = s.interrupted
		if err != nil {
			if errors.Is(err, errEnded) {
				c.report(e, s)
				return nil
			}
			fmt.Fprintln(os.Stderr, "blaise-agent:", err)
		}
	}
	if s == nil {
		return nil
	}
	if c.End {
		_ = s.live.Stop("closed", false)
	} else {
		_ = s.live.StopIdle()
	}
	c.report(e, s)
	return nil
}

// report waits for the run to end and says where the session stands.
func (c *RunCmd) report(e *blaise.Engine, s *attached) {
	rec, err := s.live.Wait(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "blaise-agent:", err)
		return
	}
	switch rec.State {
	case blaise.Paused:
		fmt.Fprintf(os.Stderr, "session %s paused (%s); continue with: blaise-agent run --session %s\n", rec.ID, rec.Pause.Reason, rec.ID)
	case blaise.Ended:
		fmt.Fprintf(os.Stderr, "session %s ended (%s)\n", rec.ID, rec.EndReason)
	default:
		fmt.Fprintf(os.Stderr, "session %s is %s: %s\n", rec.ID, rec.State, rec.Teardown.LastError)
	}
}

var errEnded = errors.New("the session ended")

// attached is a client connected to a live session.
type attached struct {
	interrupted time.Time // the last Ctrl-C during a turn
	term        *client.Terminal
	live        *blaise.Live
	conn        *client.Conn
	acp         string // the agent's session id
	stop        func()
}

// attach starts or resumes the session and opens its ACP session.
func (c *RunCmd) attach(ctx context.Context, e *blaise.Engine, term *client.Terminal, id string) (*attached, error) {
	var live *blaise.Live
	var err error
	if id == "" {
		live, err = e.Start(c.Config)
	} else {
		live, err = e.Resume(id)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "session %s (run %d)\n", live.ID, live.Run)
	connCtx, cancel := context.WithCancel(ctx)
	fromLive, toLive := live.Stream()
	conn := client.NewConn(fromLive, toLive, term)
	go func() { _ = conn.Run(connCtx) }()
	s := &attached{term: term, live: live, conn: conn, stop: func() { cancel(); fromLive.Close() }}
	fail := func(err error) (*attached, error) {
		_ = live.Stop("closed", false)
		_, _ = live.Wait(ctx)
		s.close()
		return nil, err
	}
	var load string
	if id != "" {
		rec, err := e.Store.Session(id)
		if err != nil {
			return fail(err)
		}
		load = rec.ACPSessionID
	}
	cwd, _ := os.Getwd()
	if s.acp, err = conn.Open(ctx, term.Capabilities(), cwd, load); err != nil {
		return fail(err)
	}
	if load != "" {
		term.EndTurn("end_turn") // the replayed history ends where the new turn starts
	}
	return s, nil
}

// prompt runs one turn. The first Ctrl-C cancels the turn; a second one
// ends the session (closed).
func (s *attached) prompt(ctx context.Context, text string, sig <-chan os.Signal) error {
	type result struct {
		stopReason string
		err        error
	}
	done := make(chan result, 1)
	go func() {
		stop, err := s.conn.Prompt(ctx, s.acp, text)
		done <- result{stop, err}
	}()
	cancelled := false
	for {
		select {
		case r := <-done:
			if r.err != nil {
				if errors.Is(r.err, client.ErrClosed) {
					<-s.live.Done()
				}
				if s.ended() {
					return errEnded
				}
				return r.err
			}
			s.term.EndTurn(r.stopReason)
			return nil
		case <-sig:
			s.interrupted = time.Now()
			if cancelled {
				fmt.Fprintln(os.Stderr, "\nending the session")
				_ = s.live.Stop("closed", false)
				<-done
				return errEnded
			}
			cancelled = true
			s.term.Notice("cancelling the turn (Ctrl-C again ends the session)")
			_ = s.conn.Notify("session/cancel", map[string]any{"sessionId": s.acp})
			s.term.CancelPrompts()
		case <-s.live.Done():
			<-done
			return errEnded
		}
	}
}

func (s *attached) ended() bool {
	select {
	case <-s.live.Done():
		return true
	default:
		return false
	}
}

func (s *attached) close() { s.stop() }

// lastPaused returns the most recently paused session of the configuration.
func lastPaused(e *blaise.Engine, config string) (string, error) {
	abs, err := filepath.Abs(config)
	if err != nil {
		return "", err
	}
	recs, err := e.Store.Sessions()
	if err != nil {
		return "", err
	}
	var last *blaise.SessionRecord
	for _, r := range recs {
		if r.State == blaise.Paused && r.Config == abs && (last == nil || r.PausedAt.After(last.PausedAt)) {
			last = r
		}
	}
	if last == nil {
		return "", fmt.Errorf("no paused session of %s to continue", config)
	}
	return last.ID, nil
}

// doubleInterrupt is how soon a second Ctrl-C must follow the one that
// cancelled a turn to end the session.
const doubleInterrupt = 2 * time.Second

// readLines sends the lines of r, without their line ends, until it ends.
func readLines(r io.Reader) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				out <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}
