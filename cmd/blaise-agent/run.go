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
	"sync"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/client"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/blaiseagent/blaise-agent/serverclient"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/mattn/go-isatty"
)

// RunCmd is `blaise-agent run`: a terminal ACP client of one session.
type RunCmd struct {
	ConfigFlag
	Session  string   `help:"Continue the paused session with this id: a resume run re-attaches the plugs and loads the ACP session." xor:"which" predictor:"session" placeholder:"ID"`
	Continue bool     `help:"Continue the most recently paused session of this configuration." xor:"which"`
	Prompt   []string `arg:"" optional:"" help:"The prompt. Without one, an interactive prompt reads lines until end of input."`
	Yes      bool     `help:"Allow every permission request without asking." xor:"answer"`
	No       bool     `help:"Deny every permission request without asking." xor:"answer"`
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
func (f *SessionFlags) engine(g *Globals) (*blaise.Engine, error) {
	e, err := f.StateFlags.engine(g)
	if err != nil {
		return nil, err
	}
	e.Settings = session.Settings{
		IdlePolicy:      session.IdlePolicy(f.IdlePolicy),
		PausedLifetime:  f.PausedLifetime,
		InactivityLimit: f.InactivityLimit,
		Timeout:         f.Timeout,
		StartupLimit:    f.StartupLimit,
	}
	return e, nil
}

// engine opens the store and returns the lifecycle engine.
func (f *StateFlags) engine(g *Globals) (*blaise.Engine, error) {
	store, err := blaise.OpenStore(f.dir())
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
		LogArgs: []string{"--log-level", g.LogLevel, "--log-format", g.LogFormat, "--color", g.childColor()},
		Log:     g.Logger(),
	}, nil
}

// Run runs the session.
func (c *RunCmd) Run(g *Globals) error {
	// Signals are watched from here to the end: no moment of the run is
	// deaf to Ctrl-C or SIGTERM.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	if c.Server != "" {
		return c.runRemote(g, sig)
	}
	e, err := c.engine(g)
	if err != nil {
		return err
	}
	ctx, interrupted := untilSignal(sig)
	err = e.Sweep(ctx)
	if interrupted() {
		return errInterrupted
	}
	if err != nil {
		g.Logger().Warn("settling earlier sessions", "err", err)
	}
	interactive := len(c.Prompt) == 0
	// Ctrl-C read by the line editor, as the signal it stands for.
	interrupt := func() {
		select {
		case sig <- os.Interrupt:
		default:
		}
	}
	in, err := client.NewInput(os.Stdin, os.Stderr, filepath.Join(e.Store.(*blaise.Store).Dir(), historyFile), interrupt)
	if err != nil {
		return err
	}
	defer in.Close()
	term := newTerminal(g.color(), c.Raw, in)
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
	e.OnAttach = func(_, plug string) {
		if plug == "" {
			term.Relabel("starting the agent")
		} else {
			term.Relabel("attaching: " + plug)
		}
	}
	switch {
	case c.Yes:
		term.Default = "allow"
	case c.No:
		term.Default = "deny"
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

	id := c.Session
	if c.Continue {
		if id, err = lastPaused(e, c.Config); err != nil {
			return err
		}
	}
	t := &terminalRun{cmd: c, e: e, term: term, sig: sig, in: in}
	defer t.close()
	return t.run(id, interactive)
}

// runRemote is run --server: a session of a server's agent.
func (c *RunCmd) runRemote(g *Globals, sig chan os.Signal) error {
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
	term := newTerminal(g.color(), c.Raw, in)
	switch {
	case c.Yes:
		term.Default = "allow"
	case c.No:
		term.Default = "deny"
	}
	t := &serverclient.Terminal{
		Client: c.client(), Agent: c.Agent, Term: term, Session: c.Session, Prompts: c.Prompt, Sig: sig, End: c.End,
		Read: func() (string, bool) {
			line, err := in.ReadLine(context.Background(), "> ")
			return line, err == nil
		},
	}
	return t.Run(context.Background())
}

// historyFile, in the state directory, keeps the prompts typed at the
// interactive prompt across runs.
const historyFile = "history"

// newTerminal returns the terminal's renderer: Markdown rendered and a
// spinner when stdout is a terminal (not with raw), styles as color says.
func newTerminal(color client.ColorMode, raw bool, in client.Input) *client.Terminal {
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

// terminalRun is one `run` in the terminal: its prompts, the session they
// go to, and the turns that failed.
type terminalRun struct {
	cmd    *RunCmd
	e      *blaise.Engine
	term   *client.Terminal
	sig    chan os.Signal
	in     client.Input
	s      *attached // nil until the first prompt
	failed int       // turns that failed
}

// endCommand, typed at the interactive prompt, ends the session.
const endCommand = "/end"

// run sends the prompts to session id ("": a new one) and says where the
// session stands at the end.
func (t *terminalRun) run(id string, interactive bool) error {
	end := t.cmd.End
	if interactive && id != "" && isatty.IsTerminal(os.Stdin.Fd()) {
		// The person sees the session and its history before the first
		// prompt. (Lines from a pipe attach at the first prompt, so that
		// an /end there ends the session without a run.)
		if err := t.attachOrReport(id, end); err != nil {
			return err
		}
	}
	for first := true; ; first = false {
		var prompt string
		if interactive {
			line, ok := t.readPrompt()
			if !ok {
				break // the person left (L9), or the session is over
			}
			prompt = strings.TrimRight(line, "\r\n")
			if strings.TrimSpace(prompt) == "" {
				continue
			}
			if strings.TrimSpace(prompt) == endCommand {
				end = true
				break
			}
		} else {
			if !first {
				break
			}
			prompt = strings.Join(t.cmd.Prompt, " ")
		}
		if t.s == nil || t.s.ended() {
			// The first prompt, or the session paused while the person
			// was away: (re)attach.
			if t.s != nil {
				id = t.s.live.ID
				t.s.close()
			}
			if err := t.attachOrReport(id, end); err != nil {
				return err
			}
		}
		// An interrupt typed at the prompt is not meant for the turn.
		for len(t.sig) > 0 {
			<-t.sig
		}
		left, err := t.s.prompt(prompt, t.sig)
		switch {
		case errors.Is(err, errEnded):
			return t.report(end)
		case err != nil:
			t.failed++
			fmt.Fprintln(os.Stderr, "blaise-agent: the turn failed:", err)
		}
		if left {
			break
		}
	}
	if t.s == nil {
		if end && id != "" {
			return t.endAtRest(id)
		}
		if end {
			fmt.Fprintln(os.Stderr, "no session to end")
		}
		return nil
	}
	t.stop(end)
	return t.report(end)
}

// attachOrReport attaches to session id ("": a new one); when that fails
// after the run started, it says where the session stands and returns the
// error to exit with.
func (t *terminalRun) attachOrReport(id string, end bool) error {
	err := t.attach(id, end)
	if err == nil || t.s == nil {
		return err
	}
	// A run that ended on its own has its cause in its record, which
	// report shows.
	if rerr := t.report(end); rerr != nil {
		return rerr
	}
	if errors.Is(err, errInterrupted) {
		return err
	}
	return &exitError{1, err}
}

// readPrompt reads the next line at the interactive prompt. It says when
// the session pauses or is about to end on its own while the person is
// away; ok is false when the person leaves or the session is over.
func (t *terminalRun) readPrompt() (prompt string, ok bool) {
	var lines []string
	for ps := "> "; ; ps = continuePrompt {
		line, ok := t.readLine(ps)
		if !ok {
			return "", false
		}
		if strings.TrimSpace(line) != "" {
			t.in.Remember(line)
		}
		// A line ending in a backslash goes on on the next one.
		rest, more := strings.CutSuffix(line, `\`)
		lines = append(lines, rest)
		if !more {
			return strings.Join(lines, "\n"), true
		}
	}
}

// continuePrompt asks for the next line of a prompt of several lines.
const continuePrompt = "… "

// readLine reads one line at the interactive prompt, saying what happens to
// the session meanwhile; ok is false when the person leaves or the session
// is over.
func (t *terminalRun) readLine(ps string) (line string, ok bool) {
	var done <-chan struct{}
	var warn <-chan time.Time
	if t.s != nil && !t.s.ended() {
		done = t.s.live.Done()
		if st := t.s.settings; st.IdlePolicy == session.PolicyEnd {
			timer := time.NewTimer(max(st.InactivityLimit-warnAhead, 0))
			defer timer.Stop()
			warn = timer.C
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		line, err := t.in.ReadLine(ctx, ps)
		got <- read{line, err}
	}()
	for {
		select {
		case r := <-got:
			if r.err != nil {
				fmt.Fprintln(os.Stderr)
				return "", false // end of input, or Ctrl-C in the editor
			}
			return r.line, true
		case <-t.sig:
			fmt.Fprintln(os.Stderr)
			return "", false // Ctrl-C at the prompt leaves
		case <-warn:
			st := t.s.settings
			t.term.Notice(fmt.Sprintf("the session ends in %s unless a prompt comes: its idle policy is end (inactivity limit %s)", min(warnAhead, st.InactivityLimit), st.InactivityLimit))
			warn = nil
		case <-done:
			done, warn = nil, nil
			rec, err := t.s.live.Wait(context.Background())
			if err != nil || rec.State != session.Paused || rec.Pause == nil || rec.Pause.Reason != session.Idle {
				fmt.Fprintln(os.Stderr)
				return "", false // report says what happened
			}
			t.term.Log(fmt.Sprintf("session %s paused (idle); the next prompt resumes it", rec.ID))
		}
	}
}

// warnAhead is how long before the session ends on its own (the run's
// timeout, the end idle policy) the terminal says so.
const warnAhead = time.Minute

// stop asks the run to end: closed when the session is to end, else idle
// under the idle policy, which is announced when it ends the session.
func (t *terminalRun) stop(end bool) {
	s := t.s
	if s.ended() || t.reported() {
		return
	}
	var err error
	switch {
	case end:
		err = s.live.Stop(session.Stop{Reason: session.Closed})
	default:
		if s.settings.IdlePolicy == session.PolicyEnd {
			fmt.Fprintln(os.Stderr, "leaving ends the session: its idle policy is end")
		}
		err = s.live.StopIdle()
	}
	if err != nil && !s.ended() {
		fmt.Fprintln(os.Stderr, "blaise-agent:", err)
	}
}

// reported tells whether the run has reported its pause: it is over, and
// a stop now would only leave a stale record.
func (t *terminalRun) reported() bool {
	rec, err := t.e.Store.Session(t.s.live.ID)
	return err == nil && rec.Pause != nil && rec.Pause.Run == t.s.live.Run
}

// report waits for the run to end, says where the session stands and
// why, and returns the error that gives run its exit status: a failed run
// or turn, or a session ended by its timeout. A session that should end
// (--end, /end) but paused because its run failed is ended here.
func (t *terminalRun) report(end bool) error {
	s := t.s
	ctx, interrupted := untilSignal(t.sig)
	rec, err := s.live.Wait(ctx)
	if interrupted() {
		fmt.Fprintf(os.Stderr, "\nleft; session %s settles on its own (see blaise-agent sessions)\n", s.live.ID)
		return errInterrupted
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", s.live.ID, err)
	}
	var failure error
	if p := rec.Pause; p != nil && p.Run == s.live.Run && p.Reason == session.Failed {
		failure = fmt.Errorf("session %s: the run failed: %s", rec.ID, p.Error)
	}
	if end && rec.State == session.Paused {
		// Its run failed, or the stop could not reach it.
		fmt.Fprintf(os.Stderr, "session %s paused; ending it as asked\n", rec.ID)
		if rec, err = t.end(rec.ID); err != nil {
			return errors.Join(failure, fmt.Errorf("session %s: ending it: %w", s.live.ID, err))
		}
	}
	if err := describe(rec, s.settings); err != nil {
		failure = errors.Join(failure, err)
	}
	if failure == nil && t.failed > 0 {
		failure = fmt.Errorf("session %s: %d turn(s) failed", rec.ID, t.failed)
	}
	if failure != nil {
		return &exitError{1, failure}
	}
	return nil
}

// describe says where the session stands; the error says why a session
// ended by its timeout, or whose teardown failed, is not fine.
func describe(rec *session.Record, st session.Settings) error {
	switch rec.State {
	case session.Paused:
		fmt.Fprintf(os.Stderr, "session %s paused (%s); continue with: blaise-agent run --session %s\n", rec.ID, rec.Pause.Reason, rec.ID)
	case session.Ended:
		fmt.Fprintf(os.Stderr, "session %s ended (%s)\n", rec.ID, rec.EndReason)
		switch rec.EndReason {
		case session.Timeout:
			return fmt.Errorf("session %s: the run reached its timeout of %s (--timeout)", rec.ID, st.Timeout)
		case session.Completed:
			fmt.Fprintf(os.Stderr, "it was idle, and its idle policy is end\n")
		}
	default:
		fmt.Fprintf(os.Stderr, "session %s is %s\n", rec.ID, rec.State)
		return fmt.Errorf("session %s: its teardown failed: %s", rec.ID, rec.Teardown.LastError)
	}
	return nil
}

// end ends a session at rest: a teardown run. A signal leaves it to
// finish on its own.
func (t *terminalRun) end(id string) (*session.Record, error) {
	ctx, interrupted := untilSignal(t.sig)
	rec, err := t.e.End(ctx, id)
	if interrupted() {
		fmt.Fprintf(os.Stderr, "\nleft; session %s tears down on its own (see blaise-agent sessions)\n", id)
		return nil, errInterrupted
	}
	return rec, err
}

// endAtRest ends a session that has no run (/end before any prompt).
func (t *terminalRun) endAtRest(id string) error {
	rec, err := t.end(id)
	if err != nil {
		return err
	}
	if err := describe(rec, rec.Settings); err != nil {
		return &exitError{1, err}
	}
	return nil
}

func (t *terminalRun) close() {
	if t.s != nil {
		t.s.close()
	}
}

var errEnded = client.ErrRunEnded

// errInterrupted is the status of a run left by a signal before it was done.
var errInterrupted = &exitError{130, errors.New("interrupted")}

// untilSignal returns a context that the next signal on sig cancels, and a
// function that stops watching and reports whether a signal came.
func untilSignal(sig <-chan os.Signal) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	stop, got := make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-sig:
			cancel()
			got <- true
		case <-stop:
			got <- false
		}
	}()
	var once sync.Once
	var signalled bool
	return ctx, func() bool {
		once.Do(func() { close(stop); signalled = <-got; cancel() })
		return signalled
	}
}

// attached is a client connected to a live session.
type attached struct {
	term     *client.Terminal
	live     *blaise.Live
	settings session.Settings
	conn     *client.Conn
	acp      string // the agent's session id
	stop     func()
}

// attach starts or resumes the session (t.s) and opens its ACP session.
// When the run starts but the ACP session cannot be opened, the run is
// stopped (end: closed), or ended on its own and its record says why.
func (t *terminalRun) attach(id string, end bool) error {
	t.s = nil
	// Busy before the run starts: the engine names the plugs attaching
	// while Start and Resume wait for the run to load them.
	t.term.Busy("attaching")
	defer t.term.Idle()
	var live *blaise.Live
	var err error
	if id == "" {
		live, err = t.e.Start(t.cmd.Config)
	} else {
		live, err = t.e.Resume(id)
	}
	if err != nil {
		return err
	}
	t.term.Log(fmt.Sprintf("session %s (run %d)", live.ID, live.Run))
	connCtx, cancel := context.WithCancel(context.Background())
	fromLive, toLive := live.Stream()
	conn := client.NewConn(fromLive, toLive, t.term)
	go func() { _ = conn.Run(connCtx) }()
	s := &attached{term: t.term, live: live, conn: conn, stop: func() { cancel(); fromLive.Close() }}
	t.s = s
	rec, err := t.e.Store.Session(live.ID)
	if err != nil {
		t.stop(end)
		return err
	}
	s.settings = rec.Settings
	go s.announceTimeout()
	cwd, _ := os.Getwd()
	ctx, interrupted := untilSignal(t.sig)
	s.acp, err = conn.Open(ctx, t.term.Capabilities(), cwd, rec.ACPSessionID)
	if interrupted() {
		fmt.Fprintln(os.Stderr, "\nstopping the run (Ctrl-C again leaves at once)")
		t.stop(end)
		return errInterrupted
	}
	if err != nil {
		if !runEnded(err) {
			t.stop(end) // the agent refused
		}
		return err
	}
	if rec.ACPSessionID != "" {
		t.term.EndTurn("end_turn") // the replayed history ends where the new turn starts
	}
	return nil
}

// runEnded reports whether err says that the run ended on its own: the
// stream closed, or the proxy answered for an agent that had stopped.
func runEnded(err error) bool {
	var rpc *client.RPCError
	return errors.Is(err, client.ErrClosed) || errors.As(err, &rpc) && rpc.Message == acp.AgentStoppedMessage
}

// announceTimeout says, a minute before, that the run's timeout will end
// the session (L4: a timeout stop does not resume).
func (s *attached) announceTimeout() {
	timeout := s.settings.Timeout
	timer := time.NewTimer(max(timeout-warnAhead, 0))
	defer timer.Stop()
	select {
	case <-timer.C:
		s.term.Notice(fmt.Sprintf("the run's timeout (%s) ends the session in %s", timeout, min(warnAhead, timeout)))
	case <-s.live.Done():
	}
}

// prompt runs one turn. The first Ctrl-C cancels the turn; a second one,
// or SIGTERM, leaves: the caller stops the run.
func (s *attached) prompt(text string, sig <-chan os.Signal) (left bool, err error) {
	return s.term.Turn(s.conn, s.acp, text, sig, s.live.Done())
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
	// Unreadable records do not hide the others; they are named only when
	// no paused session is found, as the one meant may be among them.
	recs, err := e.Store.Sessions()
	if broken := (*blaise.BrokenError)(nil); err != nil && !errors.As(err, &broken) {
		return "", err
	}
	var last *session.Record
	for _, r := range recs {
		if r.State == session.Paused && r.Config == abs && (last == nil || r.PausedAt.After(last.PausedAt)) {
			last = r
		}
	}
	if last == nil {
		return "", errors.Join(fmt.Errorf("no paused session of %s to continue", config), err)
	}
	return last.ID, nil
}
