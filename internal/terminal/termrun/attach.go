package termrun

// A client attached to a live session: its start or resume, its ACP
// session, and its turns.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// untilSignal returns a context of parent that the next signal on sig
// cancels, and a function that stops watching and reports whether a signal
// came.
func untilSignal(parent context.Context, sig <-chan os.Signal) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(parent)
	stop, got := make(chan struct{}), make(chan bool, 1)
	// Ends with a signal or with the returned func (stop).
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
	live     *engine.Live
	settings lifecycle.Settings
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
	var live *engine.Live
	var err error
	t.launched = ""
	if id == "" {
		live, err = t.e.Start(t.ctx, t.opts.Config)
		if err != nil && t.launched != "" {
			if _, serr := t.e.Store.Session(t.ctx, t.launched); errors.Is(serr, lifecycle.ErrNotFound) {
				t.term.Log(fmt.Sprintf("session %s was not kept: its first run did not load", t.launched))
			}
		}
	} else {
		live, err = t.e.Resume(t.ctx, id)
	}
	if err != nil {
		return err
	}
	connCtx, cancel := context.WithCancel(t.ctx)
	fromLive, toLive := live.Stream()
	conn := client.NewConn(fromLive, toLive, t.term)
	conn.Info = client.BlaiseAgent()
	// Ends with connCtx, cancelled by s.stop.
	go func() { _ = conn.Run(connCtx) }()
	s := &attached{term: t.term, live: live, conn: conn, stop: func() { cancel(); fromLive.Close() }}
	t.s = s
	rec, err := t.e.Store.Session(t.ctx, live.ID)
	if err != nil {
		t.stop(end)
		return err
	}
	s.settings = rec.Settings
	// Ends with the run (live.Done) or its timeout's notice.
	go s.announceTimeout()
	// A resume loads the agent's session where it was opened, wherever
	// run was started; a new session opens where the session runs.
	cwd := cmp.Or(rec.CWD, rec.Dir)
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	ctx, interrupted := untilSignal(t.ctx, t.sig)
	s.acp, err = conn.Open(ctx, t.term.Capabilities(), cwd, rec.ACPSessionID)
	if interrupted() {
		fmt.Fprintln(os.Stderr, "\nstopping the run (Ctrl-C again leaves at once)")
		t.stop(end)
		return errInterrupted
	}
	if err != nil {
		if !client.RunEnded(err) {
			t.stop(end) // the agent refused
		}
		return err
	}
	if rec.ACPSessionID != "" {
		t.term.EndTurn("end_turn") // the replayed history ends where the new turn starts
	}
	return nil
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

// lastPaused returns the most recently paused session of the configuration.
func lastPaused(ctx context.Context, e *engine.Engine, config string) (string, error) {
	abs, err := filepath.Abs(config)
	if err != nil {
		return "", err
	}
	// Unreadable records do not hide the others; they are named only when
	// no paused session is found, as the one meant may be among them.
	recs, err := e.Store.Sessions(ctx)
	if broken := (*lifecycle.BrokenError)(nil); err != nil && !errors.As(err, &broken) {
		return "", err
	}
	var last *lifecycle.Record
	for _, r := range recs {
		if r.State == lifecycle.Paused && r.Config == abs && (last == nil || r.PausedAt.After(last.PausedAt)) {
			last = r
		}
	}
	if last == nil {
		return "", errors.Join(fmt.Errorf("no paused session of %s to continue", config), err)
	}
	return last.ID, nil
}
