package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	sdk "github.com/coder/acp-go-sdk"
)

// Live is a session with a run in progress, held by its front end.
type Live struct {
	ID   string
	Run  int
	Kind lifecycle.Kind

	e *Engine
	// ctx is the context of the call that started or took back the run,
	// without its end: the run outlives that call, and what it records
	// (its stops, its end) is written whatever became of the call.
	ctx  context.Context
	proc Process
	rec  *lifecycle.Record
	in   *acp.Writer
	out  <-chan *acp.Message
	ctl  *ControlConn
	lock lifecycle.RunLock // released once the run is settled
	// reportsDone is closed when the control channel has been read to its end.
	reportsDone chan struct{}
	exited      chan struct{} // closed when the session process has exited
	loaded      chan struct{} // closed at the run's first report
	done        chan struct{}
	final       *lifecycle.Record
	err         error
	// poke wakes the timers when a deadline may have moved closer.
	poke chan struct{}

	stopMu   sync.Mutex // one Stop at a time
	mu       sync.Mutex
	activity time.Time       // the last message either way
	turns    map[string]bool // client requests waiting for their answer, by id
	// opening holds the params of the requests that open an ACP session
	// (session/new, load, resume, fork), by id, until their answer.
	opening   map[string]opening
	started   time.Time
	stopped   *lifecycle.StopRecord
	stopping  bool // a stop is decided: Send refuses
	settings  lifecycle.Settings
	resumable bool
	got       map[lifecycle.ControlKind]bool // report kinds received
	unclaimed bool                           // adopted, and no front end took its messages (Claim)
	// noting is closed once the ACP sessions opened so far are recorded
	// (noteBeside); nil when none was.
	noting chan struct{}
	notes  sync.WaitGroup // the notes being written
}

// Send passes a message of the client to the session.
func (l *Live) Send(m *acp.Message) error {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return ErrStopping
	}
	l.activity = l.e.now()
	if m.Kind == acp.Request {
		// A request waiting for its answer (a prompt's turn above all)
		// keeps the session busy: inactivity does not count (L1).
		key := acp.IDKey(m.ID)
		l.turns[key] = true
		switch m.Method {
		case sdk.AgentMethodSessionNew, sdk.AgentMethodSessionLoad, sdk.AgentMethodSessionResume, sdk.AgentMethodSessionFork:
			// Recorded with its answer: what the agent opened, in one write.
			l.opening[key] = opening{params: bytes.Clone(m.Params), idInParams: m.Method == sdk.AgentMethodSessionLoad || m.Method == sdk.AgentMethodSessionResume}
		}
	}
	noting := l.noting
	l.mu.Unlock()
	if noting != nil {
		<-noting // the ACP session this may concern is recorded first
	}
	return l.in.Write(m.Raw)
}

// ErrStopping is what Send returns once the run is being stopped: the
// message was not sent, and goes to the next run.
var ErrStopping = errors.New("the run is stopping; send the message again once it has ended")

// Messages delivers the session's messages for the client; it is closed
// when the run ends. The session/updates of a run whose records carry its
// messages (CarryingProcess: a runner's) come in bundles (acp.Bundle),
// with the session's id, as those of a Bundled engine's runs do.
func (l *Live) Messages() <-chan *acp.Message { return l.out }

// seen watches the session's messages, on the goroutine that reads them,
// for the end of turns and the ACP session id. The clock is read for the
// messages of each read of the stream, not for each message: those that
// came together are seen within a moment. At the end (m nil), it closes
// the stream.
//
// The messages of a run adopted that no front end has claimed yet are
// dropped (released), not sent: the run waits for no reader that is not
// there. Its process's output (a runner's store, which forwards a run's
// messages before it answers its calls) would fill and stop the run, its
// persisted writes and its reports unanswered, until a client came back.
// The records are stored; a client that loads the session gets its
// history.
func (l *Live) seen(m *acp.Message, fresh bool) (send bool) {
	if m == nil {
		l.proc.Stdout().Close()
		return false
	}
	l.mu.Lock()
	if fresh {
		l.activity = l.e.now()
	}
	send = !l.unclaimed
	idle := false
	var opened opening
	var wasOpening, newSession bool
	if m.Kind == acp.Response {
		key := acp.IDKey(m.ID)
		_, waited := l.turns[key]
		delete(l.turns, key)
		idle = waited && len(l.turns) == 0
		if opened, wasOpening = l.opening[key]; wasOpening {
			delete(l.opening, key)
		} else {
			// Not an opening this run saw asked (one sent before an
			// adoption): its session id, if the answer has one.
			newSession = strings.Contains(string(m.Result), `"sessionId"`)
		}
	}
	l.mu.Unlock()
	if idle {
		l.wake() // inactivity counts from now
	}
	switch {
	case wasOpening && m.Error == nil:
		l.noteBeside(opened, m.Result)
	case newSession:
		l.noteBeside(opening{}, m.Result)
	}
	if !send {
		m.Release()
	}
	return send
}

func (l *Live) wake() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// noteBeside records the ACP session that o opened (noteACPSession) while
// its answer goes on to the client, and holds what the client sends next
// (Send) until the record is durable: the answer does not wait for the
// write, yet nothing is said in the session before it is recorded. A front
// end that dies in between leaves the session process, whose pause names
// the session (L7); a crash of the machine, a conversation that holds
// nothing. The notes of one run are written in the order of their answers.
func (l *Live) noteBeside(o opening, result []byte) {
	result = bytes.Clone(result) // the message's block is read into again
	done := make(chan struct{})
	l.mu.Lock()
	prev := l.noting
	l.noting = done
	l.mu.Unlock()
	l.notes.Add(1)
	go func() {
		defer l.notes.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		l.noteACPSession(o, result)
	}()
}

// Noted is closed once the ACP sessions this run opened so far are
// recorded.
func (l *Live) Noted() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noting == nil {
		return closed
	}
	return l.noting
}

// closed is a channel that is closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// opening is a request that opens an ACP session, waiting for its answer.
type opening struct {
	params     []byte // nil: not known (a request sent before an adoption)
	idInParams bool   // the session's id is the params' (load, resume), not the answer's
}

// noteACPSession records the ACP session that a request opened, once the
// agent answered it: the agent's session id (the answer's, or for a load
// or resume the params'), and with params the cwd and mcpServers that a
// resume loads it with. A load of the session as it was opened (a
// resume's) writes nothing.
func (l *Live) noteACPSession(o opening, result []byte) {
	var p, r struct {
		SessionID  string          `json:"sessionId"`
		CWD        string          `json:"cwd"`
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if o.params != nil && json.Unmarshal(o.params, &p) != nil {
		return
	}
	_ = json.Unmarshal(result, &r)
	id := r.SessionID
	if o.idInParams {
		id = p.SessionID
	}
	if id == "" {
		return
	}
	_, err := l.e.Store.UpdateSession(l.ctx, l.ID, func(rec *lifecycle.Record) error {
		if rec.ACPSessionID == id && (o.params == nil || rec.CWD == p.CWD && sameJSON(rec.MCPServers, p.MCPServers)) {
			return lifecycle.ErrUnchanged
		}
		rec.ACPSessionID = id
		if o.params != nil {
			rec.CWD, rec.MCPServers = p.CWD, p.MCPServers
		}
		return nil
	})
	if err != nil && !errors.Is(err, lifecycle.ErrUnchanged) {
		l.e.logger().Warn("recording the ACP session failed", "session", l.ID, "err", err)
	}
}

// sameJSON reports whether a and b are the same JSON text but for spaces
// (a store may keep it indented).
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// Stop sends a stop directive once it is recorded durably (L3). Only the
// first stop that was recorded counts; failed and expired are never sent.
// A stop no run receives (the run reported its pause, or is gone) is an
// error wrapping ErrNoRun, and leaves the record as it was.
func (l *Live) Stop(s lifecycle.Stop) error {
	if !slices.Contains(lifecycle.StopReasons, s.Reason) {
		return fmt.Errorf("%q is not a stop reason (want one of %s)", s.Reason, lifecycle.ReasonList(lifecycle.StopReasons))
	}
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	if l.stopSent() {
		return nil
	}
	noRun := fmt.Errorf("session %s: run %d: %w", l.ID, l.Run, ErrNoRun)
	select {
	case <-l.exited:
		return noRun
	default:
	}
	stop := &lifecycle.StopRecord{Stop: s, At: l.e.now(), Run: l.Run}
	var before *lifecycle.StopRecord
	if _, err := l.e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error {
		if l.Kind != lifecycle.TeardownRun && r.Pause != nil && r.Pause.Run == l.Run {
			return noRun // its pause is recorded: it takes no stop any more
		}
		before, r.Stop = r.Stop, stop
		return nil
	}); err != nil {
		return err
	}
	l.mu.Lock()
	l.stopped, l.stopping = stop, true
	l.mu.Unlock()
	l.wake()
	if err := l.ctl.Send(lifecycle.Control{Kind: lifecycle.ControlStop, Run: l.Run, Stop: &s}); err != nil {
		// Not sent: no stale, undelivered stop is left behind.
		_, uerr := l.e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error {
			if r.Stop != nil && r.Stop.At.Equal(stop.At) {
				r.Stop = before
			}
			return nil
		})
		l.mu.Lock()
		l.stopped, l.stopping = nil, false
		l.mu.Unlock()
		return errors.Join(fmt.Errorf("%w: %w", noRun, err), uerr)
	}
	_, err := l.e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error {
		if r.Stop != nil && r.Stop.At.Equal(stop.At) {
			r.Stop.Delivered = true
		}
		return nil
	})
	return err
}

// ErrNoRun is what Stop returns when no run receives the stop.
var ErrNoRun = errors.New("no run receives the stop")

func (l *Live) stopSent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped != nil
}

// StopIdle stops the session as idle under its policy (L4, L9).
func (l *Live) StopIdle() error {
	l.mu.Lock()
	s := l.settings.IdlePolicy.IdleStop(l.resumable)
	l.mu.Unlock()
	return l.Stop(s)
}

// Wait waits for the run to end and returns the session as it is then.
func (l *Live) Wait(ctx context.Context) (*lifecycle.Record, error) {
	select {
	case <-l.done: // ended: its record, even once ctx has ended too
		return l.final, l.err
	default:
	}
	select {
	case <-l.done:
		return l.final, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the run has ended.
func (l *Live) Done() <-chan struct{} { return l.done }

func (l *Live) readControl() {
	defer close(l.reportsDone)
	for {
		c, err := l.ctl.Receive()
		if err != nil {
			return
		}
		l.mu.Lock()
		first := !l.got[c.Kind]
		l.got[c.Kind] = true
		if c.Kind == lifecycle.ControlLoaded && c.Loaded != nil {
			l.resumable, l.settings = c.Loaded.Resumable, c.Loaded.Settings
			l.activity = l.e.now()
		}
		l.mu.Unlock()
		if c.Kind == lifecycle.ControlLoaded && first {
			close(l.loaded)
			l.wake() // the settings may be shorter than the engine's
		}
		if c.Kind == lifecycle.ControlAttaching && l.e.OnAttach != nil {
			l.e.OnAttach(l.ID, c.Plug)
		}
	}
}

// wait reaps the session process and settles what it left undone: a run
// that ended without reporting its pause failed (L7), and one whose
// teardown never reported counts as a failed teardown.
func (l *Live) wait() {
	err := l.proc.Wait()
	close(l.exited)
	<-l.reportsDone
	l.notes.Wait() // part of the record the run ends with
	l.proc.Control().Close()
	l.proc.Stdin().Close()
	// A stop being sent ends first: its delivery, recorded once the send
	// returns, is part of the record the run ends with.
	l.stopMu.Lock()
	l.stopMu.Unlock()
	rec, rerr := l.e.Store.Session(l.ctx, l.ID)
	status := exitStatus(err)
	switch {
	case rerr != nil:
	case l.Kind != lifecycle.TeardownRun && !l.reported(lifecycle.ControlPause):
		cause := fmt.Errorf("the session process ended without reporting its pause (%s)", status)
		l.e.logger().Error("run failed", "session", l.ID, "err", cause)
		if rec, rerr = l.e.settleCrash(l.ctx, rec, cause); rerr == nil && rec.State == lifecycle.TearingDown {
			rec, rerr = l.e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error { lifecycle.BeginRun(r, lifecycle.TeardownRun, l.e.now()); return nil })
			if rerr == nil {
				rec, rerr = l.e.teardownNow(l.ctx, rec, l.lock)
			}
		}
	case rec.State == lifecycle.TearingDown && !l.reported(lifecycle.ControlTeardown):
		rec, rerr = l.e.Store.TornDown(l.ctx, l.ID, fmt.Errorf("the teardown did not finish (%s)", status), l.e.now())
	}
	if rerr == nil {
		rec, rerr = l.e.Store.UpdateSession(l.ctx, l.ID, func(r *lifecycle.Record) error { r.PID = 0; return nil })
	}
	l.lock.Release()
	l.e.track(l, false)
	l.final, l.err = rec, rerr
	close(l.done)
	if rerr == nil && l.e.Settled != nil {
		l.e.Settled(rec)
	}
	l.e.Wake() // the session at rest may be due some day
}

// reported reports whether the run sent a report of kind k.
func (l *Live) reported(k lifecycle.ControlKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[k]
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
