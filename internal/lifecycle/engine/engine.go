package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/charmbracelet/log"
)

// Engine is the lifecycle engine of a front end on one machine: it starts,
// resumes and ends sessions, each run in a session process of its own, and
// keeps their settings, timers and stop directives (L1–L9).
type Engine struct {
	Store lifecycle.Store
	// Locks give each session one run at a time; nil: the Store's, when it
	// has them (the file store), else locks of this process.
	Locks lifecycle.RunLocks
	// Launcher starts the session processes of runs; nil: processes of
	// this machine, started with Command on the file store (Local).
	Launcher Launcher
	// Spare, when set, holds a session process started ahead (NewSpare),
	// which Local gives the next run it launches.
	Spare *Spare
	// Command starts a session process; the run's flags are appended
	// (default: this executable with "session-process").
	Command []string
	// Settings of new sessions.
	Settings lifecycle.Settings
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
	// Bundled: the runs' session/update notifications toward the client
	// come in bundles, with the blaise session id (acp.Bundle), for a front
	// end that passes them on as they are (front). Those of a run whose
	// records carry its messages come so whatever it says (Live.Messages).
	Bundled bool
	// StopGrace is how long a handler still attaching when its run is
	// stopped may take to reach next(); 0: session.DefaultStopGrace.
	StopGrace time.Duration
	// OnAttach, when set, is told which plug of a run attaches now, and ""
	// when its agent starts (runner.Options.OnAttach), from a goroutine of
	// the run's own.
	OnAttach func(session, plug string)
	// OnLaunch, when set, is told of a run about to be handed to its
	// session process, before anything of the run can happen or log: a
	// front end names the run before the run's own lines.
	OnLaunch func(session string, run int, kind lifecycle.Kind)
	// PlugTime, when not zero, gives the plugs of every run a clock that
	// starts there, for tests (runner.SessionProcess.PlugTime).
	PlugTime time.Time
	// FallbackFrom and FallbackTo, when set: files below FallbackFrom find
	// the files they reference that are missing there relative to
	// FallbackTo (runner.SessionProcess.Fallback).
	FallbackFrom, FallbackTo string
	// Created, when set, is called with the id of each session Start
	// creates (not a fork), before its first run: blaise-agent test stores the
	// persisted state a test gives there. An error ends the start.
	Created func(id string) error
	// Clock is the engine's time; nil: the machine's.
	Clock lifecycle.Clock
	// AdoptUntil is until when runs in progress that no process of this
	// engine holds may be handed back to it (Adopt): a server that
	// restarted gives its runners that long to come back with their runs.
	// Meanwhile no one settles them as failed.
	AdoptUntil time.Time
	// Settled, when set, is called with the record of each run of this
	// engine once the run is settled (Keep's teardowns included).
	Settled func(*lifecycle.Record)

	wakeOnce sync.Once
	wakeCh   chan struct{} // see keeperWake
	memOnce  sync.Once
	mem      *MemLocks
	// runs are its runs in progress; embedded, so that Running and Claim
	// are the engine's.
	runs
}

func (e *Engine) locks() lifecycle.RunLocks {
	if e.Locks != nil {
		return e.Locks
	}
	if l, ok := e.Store.(lifecycle.RunLocks); ok {
		return l
	}
	e.memOnce.Do(func() { e.mem = &MemLocks{} })
	return e.mem
}

func (e *Engine) clock() lifecycle.Clock {
	if e.Clock == nil {
		return lifecycle.RealClock{}
	}
	return e.Clock
}

func (e *Engine) now() time.Time { return e.clock().Now() }

func (e *Engine) logger() *log.Logger {
	if e.Log == nil {
		return log.Default()
	}
	return e.Log
}

// Start creates a session for the configuration at cfgPath and starts its
// first run, in Dir: every later run of the session runs there too. It
// returns once the run has loaded its plugs: its first report completes
// the session's settings with the configuration's session(...), under the
// engine's Settings (L7). A run that cannot load them ends at once, and
// Start returns why.
func (e *Engine) Start(ctx context.Context, cfgPath string) (*Live, error) {
	return e.start(ctx, cfgPath, e.Dir, "", "", e.Settings, "")
}

// StartIn is Start in dir rather than Dir (empty: Dir): a front end whose
// client names the session's directory (the cwd of ACP's session/new).
func (e *Engine) StartIn(ctx context.Context, cfgPath, dir string) (*Live, error) {
	return e.start(ctx, cfgPath, cmp.Or(dir, e.Dir), "", "", e.Settings, "")
}

// StartAgent is Start for a session of a named agent (a server's), whose
// settings are asked instead of the engine's, opened by owner (the name of
// its client's API token; "" for none).
//
// A session of an agent may have its configuration and directory from
// elsewhere: with cfgPath "" and no Dir, the record has neither until its
// Launcher records them (a server's, those of the runner that takes it).
func (e *Engine) StartAgent(ctx context.Context, cfgPath, agent, owner string, asked lifecycle.Settings) (*Live, error) {
	return e.start(ctx, cfgPath, e.Dir, agent, owner, asked, "")
}

// forkedFrom, when set, is the session the new one is a fork of (Fork).
func (e *Engine) start(ctx context.Context, cfgPath, dir, agent, owner string, asked lifecycle.Settings, forkedFrom string) (*Live, error) {
	var abs string
	var err error
	if cfgPath != "" || agent == "" {
		if abs, err = filepath.Abs(cfgPath); err != nil {
			return nil, err
		}
	}
	settings, err := lifecycle.NormalizeSettings(asked)
	if err != nil {
		return nil, err
	}
	if dir == "" && abs != "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("the working directory of the session: %w", err)
		}
	}
	id := e.Store.NewSessionID()
	// Locked before the record exists: no sweep ever sees it active and free.
	lock, err := e.locks().RunLock(id, true, true)
	if err != nil {
		return nil, err
	}
	now := e.now()
	rec := &lifecycle.Record{ID: id, Config: abs, Dir: dir, State: lifecycle.Active, Created: now, Updated: now, Settings: settings, Asked: asked, Resumable: true, AgentName: agent, Owner: owner, ForkedFrom: forkedFrom, PID: e.Spare.PID()}
	lifecycle.BeginRun(rec, lifecycle.StartRun, now)
	if err := e.Store.CreateSession(ctx, rec); err != nil {
		lock.Release()
		return nil, err
	}
	defer lock.Release() // the run holds a lock of its own
	if e.Created != nil && forkedFrom == "" {
		if err := e.Created(id); err != nil {
			return nil, errors.Join(err, e.Store.Discard(ctx, id))
		}
	}
	l, err := e.launch(ctx, rec, lifecycle.StartRun, "", lock)
	if err != nil {
		// Settled even when ctx ended meanwhile: no session is left active
		// without a run.
		_, _ = e.settleCrash(context.WithoutCancel(ctx), rec, err)
		return nil, err
	}
	select {
	case <-l.loaded:
		return l, nil
	case <-l.done:
		select {
		case <-l.loaded: // closed before done: the run ended after it
			return l, nil
		default:
		}
	case <-ctx.Done():
		// The caller is gone: the run goes on under its timers (L1), as
		// one whose front end went away.
		return nil, ctx.Err()
	}
	// The run ended before it loaded its plugs (the configuration does not
	// load): no plug ran, so there is nothing to tear down, and the session
	// goes as if it had never been.
	final, err := l.Wait(ctx)
	if err == nil {
		err = fmt.Errorf("session %s: the run ended before it loaded its plugs", l.ID)
		if final.Pause != nil && final.Pause.Error != "" {
			err = errors.New(final.Pause.Error)
		}
	}
	// Discarded even when ctx ended meanwhile: no session of a run that
	// never loaded is left behind.
	if derr := e.Store.Discard(context.WithoutCancel(ctx), id); derr != nil {
		return nil, errors.Join(err, derr)
	}
	return nil, err
}

// Resume starts a resume run of a paused session (L6). Exactly one of two
// resumes at once proceeds; the other gets "session ID is active" and
// changes nothing (L2).
func (e *Engine) Resume(ctx context.Context, id string) (*Live, error) {
	lock, err := e.locks().RunLock(id, false, true)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		return nil, activeError(id)
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release() // the run holds a lock of its own
	rec, err := e.settleIfGone(ctx, id)
	if err == nil {
		rec, err = e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
			if r.State != lifecycle.Paused {
				return lifecycle.StateError(r, "only a paused session can resume")
			}
			r.State, r.Stop, r.PausedAt, r.ExpiresAt = lifecycle.Active, nil, time.Time{}, time.Time{}
			r.PID = e.Spare.PID()
			lifecycle.BeginRun(r, lifecycle.ResumeRun, e.now())
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	l, err := e.launch(ctx, rec, lifecycle.ResumeRun, "", lock)
	if err != nil {
		// Paused again even when ctx ended meanwhile, as it was.
		_, _ = e.Store.UpdateSession(context.WithoutCancel(ctx), id, func(r *lifecycle.Record) error {
			r.State, r.PausedAt, r.ExpiresAt = lifecycle.Paused, rec.Pause.At, rec.Pause.At.Add(r.Settings.PausedLifetime)
			r.PID = 0
			lifecycle.ForgetRun(r)
			return nil
		})
	}
	return l, err
}

// settleIfGone returns the record of a session whose run lock this process
// holds, after settling a run that died without a word (L7): marked active,
// but no process holds its lock. A run that may still be handed back
// (AdoptUntil) is left as it is, and the session is active. A fork's
// first run that died so fails the fork, which is over (settleUnmadeFork).
func (e *Engine) settleIfGone(ctx context.Context, id string) (*lifecycle.Record, error) {
	rec, err := e.Store.Session(ctx, id)
	if err == nil && e.adopting(rec) {
		return nil, fmt.Errorf("%w, on a runner that may still hand it back", activeError(id))
	}
	if err != nil || rec.State != lifecycle.Active {
		return rec, err
	}
	if forking(rec) {
		return settleUnmadeFork(ctx, e.Store, id, e.now())
	}
	return e.settleCrash(ctx, rec, fmt.Errorf("the session process %d is gone", rec.PID))
}

// End ends a session that is not running: a paused session gets a teardown
// run with reason closed (C8). A session with a run in progress is ended
// through its Live; ending one that no front end holds fails and changes
// nothing (L3).
func (e *Engine) End(ctx context.Context, id string) (*lifecycle.Record, error) {
	lock, err := e.locks().RunLock(id, false, true)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		if rec, rerr := e.Store.Session(ctx, id); rerr == nil && (rec.State == lifecycle.TearingDown || rec.State == lifecycle.Orphaned) {
			return nil, fmt.Errorf("session %s is being torn down by another process", id)
		}
		return nil, fmt.Errorf("%w; end it from its front end", activeError(id))
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	rec, err := e.settleIfGone(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == lifecycle.Ended {
		return rec, nil
	}
	if c, ok := e.Launcher.(Checker); ok {
		if err := c.CanLaunch(rec); err != nil {
			return nil, err
		}
	}
	rec, err = e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		if r.State == lifecycle.Paused {
			r.EndReason = lifecycle.Closed
		}
		r.State = lifecycle.TearingDown
		lifecycle.BeginRun(r, lifecycle.TeardownRun, e.now())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e.teardownNow(ctx, rec, lock)
}

// Resolve marks an orphaned session ended: a person cleaned up what its
// plugs left behind (L2). Its persisted state is deleted.
func (e *Engine) Resolve(ctx context.Context, id string) (*lifecycle.Record, error) {
	lock, err := e.locks().RunLock(id, false, true)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		// Held by a run: a teardown of another process, or a live run,
		// which is no orphan.
		rec, rerr := e.Store.Session(ctx, id)
		if rerr == nil && rec.State != lifecycle.TearingDown && rec.State != lifecycle.Orphaned {
			return nil, lifecycle.StateError(rec, "only an orphaned session can be resolved")
		}
		return nil, fmt.Errorf("session %s is being torn down by another process", id)
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	rec, err := e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		if r.State != lifecycle.Orphaned {
			return lifecycle.StateError(r, "only an orphaned session can be resolved")
		}
		r.State = lifecycle.Ended
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, e.Store.DeletePersisted(ctx, id)
}

// teardownNow runs a teardown run of rec, under its run lock, and waits for
// it.
func (e *Engine) teardownNow(ctx context.Context, rec *lifecycle.Record, lock lifecycle.RunLock) (*lifecycle.Record, error) {
	l, err := e.launch(ctx, rec, lifecycle.TeardownRun, rec.EndReason, lock)
	if err != nil {
		// A teardown that cannot start failed: retried, then orphaned (L2).
		if _, uerr := e.Store.TornDown(ctx, rec.ID, err, e.now()); uerr != nil {
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
	_, err := e.sweep(ctx)
	return err
}

// sweep is Sweep; next is when a session it left is due next (zero: none
// is), or now when it settled one, whose record may be due again. It reads
// only the records of what the store finds due (DueSessions): the SQL
// stores find them with a query, the file store by reading every record.
func (e *Engine) sweep(ctx context.Context) (next time.Time, err error) {
	now := e.now()
	ids, next, err := e.Store.DueSessions(ctx, now)
	var errs []error
	if broken := (*lifecycle.BrokenError)(nil); errors.As(err, &broken) {
		errs = append(errs, broken) // the others are swept
	} else if err != nil {
		return time.Time{}, err
	}
	for _, id := range ids {
		if now.Before(e.AdoptUntil) {
			// A run in progress may yet be handed back: left until then.
			rec, err := e.Store.Session(ctx, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if e.adopting(rec) {
				if next.IsZero() || e.AdoptUntil.Before(next) {
					next = e.AdoptUntil
				}
				continue
			}
		}
		settled, err := e.sweepOne(ctx, id)
		if err != nil {
			errs = append(errs, err)
		}
		if settled {
			next = now
		}
	}
	return next, errors.Join(errs...)
}

// sweepOne settles one session, if its run lock is free; settled says
// whether it ran a teardown. It does not wait for the lock: a session
// whose lock is held only for a moment is swept next time.
func (e *Engine) sweepOne(ctx context.Context, id string) (settled bool, err error) {
	lock, err := e.locks().RunLock(id, false, false)
	if errors.Is(err, lifecycle.ErrRunHeld) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer lock.Release()
	rec, err := e.settleIfGone(ctx, id)
	if err != nil {
		return false, err
	}
	// A teardown that cannot start now (no runner of a server's agent is
	// connected) waits, and counts as no failed attempt: Keep sweeps it
	// again when woken (Wake) or at its next rescan.
	if c, ok := e.Launcher.(Checker); ok {
		if _, due := lifecycle.Due(rec, e.now()); due {
			if err := c.CanLaunch(rec); err != nil {
				e.logger().Info("a teardown waits for a runner", "session", id, "err", err)
				return false, nil
			}
		}
	}
	rec, err = e.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		reason, due := lifecycle.Due(r, e.now())
		if !due {
			return errNotDue
		}
		r.State, r.EndReason = lifecycle.TearingDown, reason
		lifecycle.BeginRun(r, lifecycle.TeardownRun, e.now())
		return nil
	})
	if errors.Is(err, errNotDue) {
		return false, nil
	}
	if err == nil {
		var final *lifecycle.Record
		if final, err = e.teardownNow(ctx, rec, lock); err == nil && final.State != lifecycle.Ended {
			err = final.Unsettled()
		}
	}
	if err != nil {
		// Errors of a launch name the session already.
		if !strings.HasPrefix(err.Error(), "session "+id+": ") {
			err = fmt.Errorf("session %s: %w", id, err)
		}
		return true, err
	}
	return true, nil
}

var errNotDue = errors.New("not due")

// settleCrash records the failure of a run that ended without reporting
// its pause (L7): the session pauses under the pause policy if its chain
// can resume, and is otherwise over.
func (e *Engine) settleCrash(ctx context.Context, rec *lifecycle.Record, cause error) (*lifecycle.Record, error) {
	return e.Store.UpdateSession(ctx, rec.ID, func(r *lifecycle.Record) error {
		if r.State != lifecycle.Active {
			return nil
		}
		// A run that broke after a stop that ends the session stays ended.
		var stop *lifecycle.Stop
		if r.Stop != nil && r.Stop.Run == r.Runs {
			stop = &r.Stop.Stop
		}
		p := lifecycle.Pause{Reason: lifecycle.Failed, MayResume: r.Settings.IdlePolicy.MayResume(lifecycle.Failed, r.Resumable, stop), Err: cause}
		lifecycle.ApplyPause(r, p.Record(r.Runs, e.now()))
		r.PID = 0
		return nil
	})
}

// launch starts a session process for the next run of rec, in the
// session's directory, handing it a holder of the run lock the caller
// holds.
func (e *Engine) launch(ctx context.Context, rec *lifecycle.Record, kind lifecycle.Kind, endReason lifecycle.Reason, held lifecycle.RunLock) (*Live, error) {
	flags := []string{"--session", rec.ID, "--kind", string(kind), "--run", strconv.Itoa(rec.Runs)}
	if endReason != "" {
		flags = append(flags, "--end-reason", string(endReason))
	}
	if e.Bundled {
		flags = append(flags, "--bundled")
	}
	if e.StopGrace != 0 {
		flags = append(flags, "--stop-grace", e.StopGrace.String())
	}
	if !e.PlugTime.IsZero() {
		flags = append(flags, "--plug-time", e.PlugTime.UTC().Format(time.RFC3339))
	}
	if e.FallbackFrom != "" {
		flags = append(flags, "--fallback-from", e.FallbackFrom, "--fallback-to", e.FallbackTo)
	}
	for _, a := range e.Agent {
		flags = append(flags, "--agent="+a)
	}
	// The run's own holder of the lock, kept until the run is settled.
	lock, err := held.Dup()
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", rec.ID, err)
	}
	launcher := e.Launcher
	if launcher == nil {
		launcher = Local{Engine: e}
	}
	if e.OnLaunch != nil {
		e.OnLaunch(rec.ID, rec.Runs, kind)
	}
	proc, err := launcher.Launch(ctx, Launch{Record: rec, Lock: lock, Flags: flags, Kind: kind})
	if err != nil {
		lock.Release()
		return nil, err
	}
	// For people and tests; whether the run is alive is its run lock's to
	// say. A run in the spare is named by the write that began it.
	if pid := proc.PID(); pid != 0 && pid != rec.PID {
		if _, err := e.Store.UpdateSession(ctx, rec.ID, func(r *lifecycle.Record) error { r.PID = pid; return nil }); err != nil {
			e.logger().Warn("recording the session process failed", "session", rec.ID, "err", err)
		}
	}
	l := e.newLive(ctx, rec, kind, proc, lock)
	e.run(l)
	return l, nil
}

// newLive is the Live of run rec.Runs, of kind, in proc, which holds lock.
func (e *Engine) newLive(ctx context.Context, rec *lifecycle.Record, kind lifecycle.Kind, proc Process, lock lifecycle.RunLock) *Live {
	now := e.now()
	l := &Live{
		ID: rec.ID, Run: rec.Runs, Kind: kind, e: e, ctx: context.WithoutCancel(ctx), proc: proc, rec: rec,
		in:          acp.NewWriter(proc.Stdin()),
		ctl:         NewControlConn(proc.Control(), proc.Control()),
		lock:        lock,
		done:        make(chan struct{}),
		exited:      make(chan struct{}),
		loaded:      make(chan struct{}),
		got:         map[lifecycle.ControlKind]bool{},
		reportsDone: make(chan struct{}),
		turns:       map[string]bool{},
		opening:     map[string]opening{},
		poke:        make(chan struct{}, 1),
		settings:    rec.Settings,
		// Until the run reports it, the chain resumes as it did before.
		resumable: rec.Resumable,
		activity:  now,
		started:   now,
	}
	return l
}

// run follows l's session process: its messages, reports, end and timers.
func (e *Engine) run(l *Live) {
	if l.Kind != lifecycle.TeardownRun {
		var rd *acp.Reader
		if cp, ok := l.proc.(CarryingProcess); ok && cp.CarriesMessages() {
			rd = acp.NewCarriedReader(l.proc.Stdout(), acp.MaxRecordLine)
			rd.BundleUpdates(l.ID)
		} else {
			rd = acp.NewCheckedReader(l.proc.Stdout(), 0)
		}
		l.out = acp.ReadMessages(rd, e.logger(), l.seen)
	} else {
		// Ends with the run's output, as the process exits.
		go func() { _, _ = io.Copy(io.Discard, l.proc.Stdout()) }()
	}
	e.track(l, true)
	// They end with the run: wait waits for readControl (reportsDone);
	// timers ends once the process has exited (l.exited).
	go l.readControl()
	go l.wait()
	go l.timers()
}
