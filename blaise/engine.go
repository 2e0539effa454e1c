package blaise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/charmbracelet/log"
)

// Engine is the lifecycle engine of a front end on one machine: it starts,
// resumes and ends sessions, each run in a session process of its own, and
// keeps their settings, timers and stop directives (L1–L9).
type Engine struct {
	Store *Store
	// Command starts a session process; the run's flags are appended
	// (default: this executable with "session-process").
	Command []string
	// Settings of new sessions.
	Settings Settings
	// TimeoutGrace is how long a run may ignore a timeout stop before it is
	// failed (L5); 0: TimeoutGrace.
	TimeoutGrace time.Duration
	// Stderr receives the session processes' logs; nil: os.Stderr.
	Stderr io.Writer
	// LogArgs are passed to session processes (e.g. --log-level debug).
	LogArgs []string
	Log     *log.Logger
	// Agent, when set, replaces the command and arguments of the
	// configuration's agent in every run (blaise-agent test runs its
	// scripted agent so).
	Agent []string
	// Dir is the working directory of new sessions, where all their runs
	// run; empty: this process's.
	Dir string
	// Env is the environment of session processes; empty: this process's.
	Env []string
	// StopGrace is how long a handler still attaching when its run is
	// stopped may take to reach next(); 0: runner.DefaultStopGrace.
	StopGrace time.Duration
	// OnAttach, when set, is told which plug of a run attaches now, and ""
	// when its agent starts (runner.Options.OnAttach), from a goroutine of
	// the run's own.
	OnAttach func(session, plug string)
}

func (e *Engine) logger() *log.Logger {
	if e.Log == nil {
		return log.Default()
	}
	return e.Log
}

// Start creates a session for the configuration at cfgPath and starts its
// first run, in Dir: every later run of the session runs there too.
func (e *Engine) Start(cfgPath string) (*Live, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return nil, err
	}
	cfg, err := runner.LoadConfig(abs, e.logger())
	if err != nil {
		return nil, err
	}
	settings, err := e.Settings.Over(cfg.Session).Normalize()
	if err != nil {
		return nil, err
	}
	dir := e.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("the working directory of the session: %w", err)
		}
	}
	id := e.Store.NewSessionID()
	// Locked before the record exists: no sweep ever sees it active and free.
	lock, err := e.Store.tryRunLock(id, true)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rec := &SessionRecord{ID: id, Config: abs, Dir: dir, State: Active, Created: now, Updated: now, Runs: 1, Settings: settings, Resumable: true}
	if err := e.Store.CreateSession(rec); err != nil {
		lock.release()
		return nil, err
	}
	defer lock.release() // the run holds a lock of its own
	l, err := e.launch(rec, runner.Start, "", lock)
	if err != nil {
		_, _ = e.settleCrash(rec, err)
	}
	return l, err
}

// Resume starts a resume run of a paused session (L6). Exactly one of two
// resumes at once proceeds; the other gets "session ID is active" and
// changes nothing (L2).
func (e *Engine) Resume(id string) (*Live, error) {
	lock, err := e.Store.tryRunLock(id, false)
	if errors.Is(err, errRunHeld) {
		return nil, activeError(id)
	}
	if err != nil {
		return nil, err
	}
	defer lock.release() // the run holds a lock of its own
	rec, err := e.settleIfGone(id)
	if err == nil {
		rec, err = e.Store.UpdateSession(id, func(r *SessionRecord) error {
			if r.State != Paused {
				return stateError(r, "only a paused session can resume")
			}
			r.State, r.Stop, r.PausedAt, r.ExpiresAt = Active, nil, time.Time{}, time.Time{}
			r.Runs++
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	l, err := e.launch(rec, runner.Resume, "", lock)
	if err != nil {
		_, _ = e.Store.UpdateSession(id, func(r *SessionRecord) error {
			r.State, r.PausedAt, r.ExpiresAt = Paused, rec.Pause.At, rec.Pause.At.Add(r.Settings.PausedLifetime)
			r.Runs--
			return nil
		})
	}
	return l, err
}

// settleIfGone returns the record of a session whose run lock this process
// holds, after settling a run that died without a word (L7): marked active,
// but no process holds its lock.
func (e *Engine) settleIfGone(id string) (*SessionRecord, error) {
	rec, err := e.Store.Session(id)
	if err != nil || rec.State != Active {
		return rec, err
	}
	return e.settleCrash(rec, fmt.Errorf("the session process %d is gone", rec.PID))
}

// End ends a session that is not running: a paused session gets a teardown
// run with reason closed (C8). A session with a run in progress is ended
// through its Live; ending one that no front end holds fails and changes
// nothing (L3).
func (e *Engine) End(ctx context.Context, id string) (*SessionRecord, error) {
	lock, err := e.Store.tryRunLock(id, false)
	if errors.Is(err, errRunHeld) {
		if rec, rerr := e.Store.Session(id); rerr == nil && (rec.State == TearingDown || rec.State == Orphaned) {
			return nil, fmt.Errorf("session %s is being torn down by another process", id)
		}
		return nil, fmt.Errorf("%w; end it from its front end", activeError(id))
	}
	if err != nil {
		return nil, err
	}
	defer lock.release()
	rec, err := e.settleIfGone(id)
	if err != nil {
		return nil, err
	}
	if rec.State == Ended {
		return rec, nil
	}
	rec, err = e.Store.UpdateSession(id, func(r *SessionRecord) error {
		if r.State == Paused {
			r.EndReason = builtins.ReasonClosed
		}
		r.State = TearingDown
		r.Runs++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e.teardownNow(ctx, rec, lock)
}

// Resolve marks an orphaned session ended: a person cleaned up what its
// plugs left behind (L2). Its persisted state is deleted.
func (e *Engine) Resolve(id string) (*SessionRecord, error) {
	lock, err := e.Store.tryRunLock(id, false)
	if errors.Is(err, errRunHeld) {
		return nil, fmt.Errorf("session %s is being torn down by another process", id)
	}
	if err != nil {
		return nil, err
	}
	defer lock.release()
	rec, err := e.Store.UpdateSession(id, func(r *SessionRecord) error {
		if r.State != Orphaned {
			return stateError(r, "only an orphaned session can be resolved")
		}
		r.State = Ended
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, e.Store.DeletePersisted(id)
}

// teardownNow runs a teardown run of rec, under its run lock, and waits for
// it.
func (e *Engine) teardownNow(ctx context.Context, rec *SessionRecord, lock *runLock) (*SessionRecord, error) {
	l, err := e.launch(rec, runner.Teardown, rec.EndReason, lock)
	if err != nil {
		// A teardown that cannot start failed: retried, then orphaned (L2).
		if _, uerr := e.Store.UpdateSession(rec.ID, func(r *SessionRecord) error {
			ApplyTeardown(r, err, time.Now())
			return nil
		}); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	return l.Wait(ctx)
}

// Sweep does what sessions at rest need: expired paused sessions get a
// teardown run with reason expired (L6), due teardown retries run, and
// sessions whose run died with its front end are settled as failed runs.
// A session whose run lock is held has a run alive, starting or ending,
// which settles it: the sweep leaves it alone. Its error names what it
// could not settle: records it cannot read, and teardowns that failed (the
// session is left tearing_down or orphaned).
func (e *Engine) Sweep(ctx context.Context) error {
	recs, err := e.Store.Sessions()
	var errs []error
	if broken := (*BrokenError)(nil); errors.As(err, &broken) {
		errs = append(errs, broken) // the others are swept
	} else if err != nil {
		return err
	}
	for _, rec := range recs {
		if _, due := Due(rec, time.Now()); !due && rec.State != Active {
			continue
		}
		if err := e.sweepOne(ctx, rec.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepOne settles one session, if its run lock is free.
func (e *Engine) sweepOne(ctx context.Context, id string) error {
	// Not waiting: a session whose lock is held only for a moment is
	// swept next time.
	lock, err := e.Store.lockRunOnce(id, false)
	if errors.Is(err, errRunHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.release()
	if _, err := e.settleIfGone(id); err != nil {
		return err
	}
	rec, err := e.Store.UpdateSession(id, func(r *SessionRecord) error {
		reason, due := Due(r, time.Now())
		if !due {
			return errNotDue
		}
		r.State, r.EndReason = TearingDown, reason
		r.Runs++
		return nil
	})
	if errors.Is(err, errNotDue) {
		return nil
	}
	if err == nil {
		var final *SessionRecord
		if final, err = e.teardownNow(ctx, rec, lock); err == nil && final.State != Ended {
			err = final.Unsettled()
		}
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	return nil
}

var errNotDue = errors.New("not due")

// settleCrash records the failure of a run that ended without reporting
// its pause (L7): the session pauses under the pause policy if its chain
// can resume, and is otherwise over.
func (e *Engine) settleCrash(rec *SessionRecord, cause error) (*SessionRecord, error) {
	return e.Store.UpdateSession(rec.ID, func(r *SessionRecord) error {
		if r.State != Active {
			return nil
		}
		// A run that broke after a stop that ends the session stays ended.
		mayResume := r.Settings.IdlePolicy == PolicyPause && r.Resumable && (r.Stop == nil || r.Stop.Run != r.Runs || r.Stop.MayResume)
		ApplyPause(r, Pause{Run: r.Runs, Reason: builtins.ReasonFailed, MayResume: mayResume, Error: cause.Error()}, time.Now())
		r.PID = 0
		return nil
	})
}

// WorkDir is where the session's runs run, so that its plugs' relative
// paths name the same files in every run: the working directory of its
// first run (the configuration's directory for a record without one).
func (r *SessionRecord) WorkDir() (string, error) {
	dir := r.Dir
	if dir == "" {
		dir = filepath.Dir(r.Config)
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("session %s: the directory it runs in: %w", r.ID, err)
	}
	return dir, nil
}

// launch starts a session process for the next run of rec, in the
// session's directory, handing it the run lock the caller holds.
func (e *Engine) launch(rec *SessionRecord, kind runner.Kind, endReason string, held *runLock) (*Live, error) {
	dir, err := rec.WorkDir()
	if err != nil {
		return nil, err
	}
	command := e.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		command = []string{exe, "session-process"}
	}
	args := append(append([]string(nil), command[1:]...), e.LogArgs...)
	args = append(args, "--state-dir", e.Store.Dir(), "--session", rec.ID, "--kind", string(kind), "--run", strconv.Itoa(rec.Runs))
	if endReason != "" {
		args = append(args, "--end-reason", endReason)
	}
	if e.StopGrace != 0 {
		args = append(args, "--stop-grace", e.StopGrace.String())
	}
	for _, a := range e.Agent {
		args = append(args, "--agent="+a)
	}
	var opened []*os.File // closed should the start fail
	fail := func(err error) (*Live, error) {
		for _, f := range opened {
			f.Close()
		}
		return nil, err
	}
	// The run's own holder of the lock, kept until the run is settled.
	lock, err := held.dup()
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", rec.ID, err)
	}
	opened = append(opened, lock.f)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("control channel: %w", err))
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	opened = append(opened, mine, theirs)
	// Pipes of our own: cmd.Wait must not close the session's output before
	// the reader took its last messages.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, stdinR, stdin)
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, stdout, stdoutW)
	cmd := exec.Command(command[0], args...)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	cmd.Dir, cmd.Env = dir, e.Env
	cmd.ExtraFiles = []*os.File{theirs, lock.f} // fd 3, fd RunLockFD
	cmd.Stderr = e.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// A group of its own: a Ctrl-C in the terminal is the front end's to
	// handle (cancel the turn), not a signal that kills the run; and a run
	// that must be killed is killed with its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("session %s: starting the session process: %w", rec.ID, err))
	}
	theirs.Close()
	stdinR.Close()
	stdoutW.Close()
	// For people and tests; whether the run is alive is its run lock's to say.
	if _, err := e.Store.UpdateSession(rec.ID, func(r *SessionRecord) error { r.PID = cmd.Process.Pid; return nil }); err != nil {
		e.logger().Warn("recording the session process failed", "session", rec.ID, "err", err)
	}
	l := &Live{
		ID: rec.ID, Run: rec.Runs, Kind: kind, e: e, cmd: cmd, rec: rec,
		in:          acp.NewWriter(stdin),
		stdin:       stdin,
		ctl:         NewControlConn(mine, mine),
		ctlFile:     mine,
		lock:        lock,
		done:        make(chan struct{}),
		exited:      make(chan struct{}),
		got:         map[string]bool{},
		reportsDone: make(chan struct{}),
		turns:       map[string]bool{},
		// Until the run reports it, the chain resumes as it did before.
		resumable: rec.Resumable,
		activity:  time.Now(),
		started:   time.Now(),
	}
	if kind != runner.Teardown {
		l.out = l.track(acp.ReadMessages(stdout, 0, e.logger()))
	} else {
		go func() { _, _ = io.Copy(io.Discard, stdout); stdout.Close() }()
	}
	go l.readControl()
	go l.wait()
	go l.timers()
	return l, nil
}

// Live is a session with a run in progress, held by its front end.
type Live struct {
	ID   string
	Run  int
	Kind runner.Kind

	e       *Engine
	cmd     *exec.Cmd
	rec     *SessionRecord
	in      *acp.Writer
	stdin   io.Closer
	out     <-chan *acp.Message
	ctl     *ControlConn
	ctlFile *os.File
	lock    *runLock // released once the run is settled
	// reportsDone is closed when the control channel has been read to its end.
	reportsDone chan struct{}
	exited      chan struct{} // closed when the session process has exited
	done        chan struct{}
	final       *SessionRecord
	err         error

	stopMu    sync.Mutex // one Stop at a time
	mu        sync.Mutex
	activity  time.Time       // the last message either way
	turns     map[string]bool // client requests waiting for their answer, by id
	started   time.Time
	stopped   *StopRecord
	stopping  bool // a stop is decided: Send refuses
	resumable bool
	got       map[string]bool // report types received
}

// Send passes a message of the client to the session.
func (l *Live) Send(m *acp.Message) error {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return ErrStopping
	}
	l.activity = time.Now()
	if m.Kind == acp.Request {
		// A request waiting for its answer (a prompt's turn above all)
		// keeps the session busy: inactivity does not count (L1).
		l.turns[acp.IDKey(m.ID)] = true
	}
	l.mu.Unlock()
	if m.Kind == acp.Request && (m.Method == "session/load" || m.Method == "session/resume") {
		l.noteACPSession(m.Params)
	}
	return l.in.Write(m.Raw)
}

// ErrStopping is what Send returns once the run is being stopped: the
// message was not sent, and goes to the next run.
var ErrStopping = errors.New("the run is stopping; send the message again once it has ended")

// Messages delivers the session's messages for the client; it is closed
// when the run ends.
func (l *Live) Messages() <-chan *acp.Message { return l.out }

// track watches the session's messages for the end of turns and the ACP
// session id.
func (l *Live) track(in <-chan *acp.Message) <-chan *acp.Message {
	out := make(chan *acp.Message, 64)
	go func() {
		defer close(out)
		for m := range in {
			l.mu.Lock()
			l.activity = time.Now()
			newSession := false
			if m.Kind == acp.Response {
				key := acp.IDKey(m.ID)
				delete(l.turns, key)
				newSession = strings.Contains(string(m.Result), `"sessionId"`)
			}
			l.mu.Unlock()
			if newSession {
				l.noteACPSession(m.Result)
			}
			out <- m
		}
	}()
	return out
}

func (l *Live) noteACPSession(params []byte) {
	var v struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &v) != nil || v.SessionID == "" {
		return
	}
	_, err := l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error {
		r.ACPSessionID = v.SessionID
		return nil
	})
	if err != nil {
		l.e.logger().Warn("recording the ACP session id failed", "session", l.ID, "err", err)
	}
}

// Stop sends a stop directive once it is recorded durably (L3). Only the
// first stop that was recorded counts; failed and expired are never sent.
// A stop no run receives (the run reported its pause, or is gone) is an
// error wrapping ErrNoRun, and leaves the record as it was.
func (l *Live) Stop(reason string, mayResume bool) error {
	if !slices.Contains(builtins.StopReasons, reason) {
		return fmt.Errorf("%q is not a stop reason (want one of %s)", reason, strings.Join(builtins.StopReasons, ", "))
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
	stop := &StopRecord{Reason: reason, MayResume: mayResume, At: time.Now(), Run: l.Run}
	var before *StopRecord
	if _, err := l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error {
		if l.Kind != runner.Teardown && r.Pause != nil && r.Pause.Run == l.Run {
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
	if err := l.ctl.Send(Control{Type: "stop", Run: l.Run, Reason: reason, MayResume: mayResume}); err != nil {
		// Not sent: no stale, undelivered stop is left behind.
		_, uerr := l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error {
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
	_, err := l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error {
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
	rec := *l.rec
	rec.Resumable = l.resumable
	l.mu.Unlock()
	s := StopFor(&rec)
	return l.Stop(s.Reason, s.MayResume)
}

// Wait waits for the run to end and returns the session as it is then.
func (l *Live) Wait(ctx context.Context) (*SessionRecord, error) {
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
		l.got[c.Type] = true
		if c.Type == "resumable" {
			l.resumable = c.Resumable
		}
		l.mu.Unlock()
		if c.Type == ControlAttaching && l.e.OnAttach != nil {
			l.e.OnAttach(l.ID, c.Plug)
		}
	}
}

// wait reaps the session process and settles what it left undone: a run
// that ended without reporting its pause failed (L7), and one whose
// teardown never reported counts as a failed teardown.
func (l *Live) wait() {
	err := l.cmd.Wait()
	close(l.exited)
	<-l.reportsDone
	l.ctlFile.Close()
	l.stdin.Close()
	rec, rerr := l.e.Store.Session(l.ID)
	status := exitStatus(err)
	switch {
	case rerr != nil:
	case l.Kind != runner.Teardown && !l.reported("pause"):
		cause := fmt.Errorf("the session process ended without reporting its pause (%s)", status)
		l.e.logger().Error("run failed", "session", l.ID, "err", cause)
		if rec, rerr = l.e.settleCrash(rec, cause); rerr == nil && rec.State == TearingDown {
			rec, rerr = l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error { r.Runs++; return nil })
			if rerr == nil {
				rec, rerr = l.e.teardownNow(context.Background(), rec, l.lock)
			}
		}
	case rec.State == TearingDown && !l.reported("teardown"):
		rec, rerr = l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error {
			ApplyTeardown(r, fmt.Errorf("the teardown did not finish (%s)", status), time.Now())
			return nil
		})
	}
	if rerr == nil {
		rec, rerr = l.e.Store.UpdateSession(l.ID, func(r *SessionRecord) error { r.PID = 0; return nil })
	}
	l.lock.release()
	l.final, l.err = rec, rerr
	close(l.done)
}

// reported reports whether the run sent a report of type typ.
func (l *Live) reported(typ string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[typ]
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// timers stops the run when it was inactive too long (L1: never while a
// request waits for its answer) or ran past its timeout, teardown runs
// included. A run that ignores a timeout stop for TimeoutGrace is failed
// (L5); one that ignores another stop, once its timeout (and at least
// TimeoutGrace) has passed since the stop. Either way it is killed with
// its process group.
func (l *Live) timers() {
	s := l.rec.Settings
	tick := min(s.InactivityLimit, s.Timeout) / 10
	tick = max(min(tick, time.Second), 2*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	grace := l.e.TimeoutGrace
	if grace == 0 {
		grace = TimeoutGrace
	}
	// A stop the run could not take (it reported its pause and is tearing
	// down): its deadline holds all the same.
	var refused *StopRecord
	for {
		select {
		case <-l.exited:
			return
		case now := <-t.C:
			l.mu.Lock()
			idle := len(l.turns) == 0 && now.Sub(l.activity) >= s.InactivityLimit && l.Kind != runner.Teardown
			timedOut := now.Sub(l.started) >= s.Timeout
			stop := l.stopped
			if stop == nil {
				stop = refused
			}
			if stop == nil && (idle || timedOut) {
				// Decided under the lock Send takes: no message slips in
				// between the decision and the stop.
				l.stopping = true
			}
			l.mu.Unlock()
			switch {
			case stop != nil && now.Sub(stop.At) >= ignoredFor(stop, s, grace):
				l.e.logger().Error("the run ignored its stop; failing it", "session", l.ID, "stop", stop.Reason)
				l.kill()
				return
			case stop != nil:
			case timedOut:
				if errors.Is(l.Stop(builtins.ReasonTimeout, false), ErrNoRun) {
					refused = &StopRecord{Reason: builtins.ReasonTimeout, At: now}
				}
			case idle:
				if errors.Is(l.StopIdle(), ErrNoRun) {
					refused = &StopRecord{Reason: builtins.ReasonIdle, At: now}
				}
			}
		}
	}
}

// ignoredFor is how long a run may go on after stop before it is killed:
// TimeoutGrace after a timeout stop (L5); after another, the run's timeout,
// and never less than TimeoutGrace, so that a short timeout leaves the
// handlers their stop grace and the pause code its time.
func ignoredFor(stop *StopRecord, s Settings, grace time.Duration) time.Duration {
	if stop.Reason == builtins.ReasonTimeout {
		return grace
	}
	return max(s.Timeout, grace)
}

// KillGrace is how long a session process being killed has, beyond its
// stop grace, between SIGTERM (which shuts its run down: its plugs'
// processes are killed) and SIGKILL.
const KillGrace = 5 * time.Second

// kill ends a run that ignored its stop: SIGTERM to its process group, then,
// should it not exit in time, SIGKILL.
func (l *Live) kill() {
	pgid := l.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	bound := l.e.StopGrace
	if bound == 0 {
		bound = runner.DefaultStopGrace
	}
	select {
	case <-l.exited:
	case <-time.After(bound + KillGrace):
		l.e.logger().Error("the session process outlived SIGTERM; killing it", "session", l.ID, "pid", pgid)
	}
	// What is left of its group too (the group cannot be reused while it
	// has members).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
