// Package enginetest is the behaviour suite of the lifecycle engine (L1–L9):
// every store, run locks and launcher a front end or the server runs the
// engine with passes it, under the same test names, as every store passes
// internal/store/storetest. Time is a fake clock that the engine's timers and
// Keep wait on: a test moves it by hand and waits on events (a run
// settled, the clock waited on), never on sleeps. Session processes are
// real: the test binary in a role (ServeRole), with the demo agent.
package enginetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// Patience is how long a test waits for an event (a run settled, a wait
// on the clock) before it fails: far beyond what it takes, even on a busy
// machine.
const Patience = time.Minute

// Setup is what a test asks of the engine it runs on.
type Setup struct {
	// Dir holds the test's blaise.star; its sessions run there.
	Dir string
	// Clock is the engine's and the store's time.
	Clock *lifecycle.FakeClock
	// Settings are those of the test's sessions (a server's agent's).
	Settings lifecycle.Settings
	// Command and Env start the session processes: the test binary, in
	// its role.
	Command []string
	Env     []string
	// Stderr takes the session processes' logs.
	Stderr io.Writer
}

// Open returns an engine on a store dated by s.Clock, with its run locks
// and its launcher of s's session processes, and the agent its sessions
// belong to ("" for none); t's cleanup closes what it opened. The suite
// sets the engine's Settings, Clock, TimeoutGrace, Dir, Log and Settled.
type Open func(t *testing.T, s Setup) (e *engine.Engine, agent string)

// Run runs the suite on the engines of open, one subtest per rule test.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Open)
	}{
		{"TestL1_InactivityCountsFromTheEndOfTheTurnOnTheEngineClock", inactivityFromTheEndOfTheTurn},
		{"TestL1_InactivityCountsFromTheRunsFirstReport", inactivityFromTheFirstReport},
		{"TestL1_SettingsOfTheConfigurationUnderTheEngines", settingsUnderTheEngines},
		{"TestL4_EndPolicyIdleCompletesAndTearsDown", endPolicyIdleCompletes},
		{"TestL5_TimeoutStopEndsTheSession", timeoutStopEnds},
		{"TestL5_ARunIgnoringItsTimeoutIsKilledAndFailed", ignoredTimeoutFails},
		{"TestL6_ExpiredSessionTornDownByKeepWithoutSweep", expiredTornDownByKeep},
		{"TestL2_TeardownRetriedByKeepThenOrphaned", teardownRetriedThenOrphaned},
		{"TestL7_UnresumableChainIsNeverPaused", unresumableNeverPaused},
		{"TestL3_AStopNoRunReceivesIsAnErrorAndChangesNothing", stopNoRunReceives},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open) })
	}
}

// lab is a directory with a configuration around the demo agent, and an
// engine on a fake clock.
type lab struct {
	t       *testing.T
	dir     string
	clock   *lifecycle.FakeClock
	engine  *engine.Engine
	agent   string
	settled chan *lifecycle.Record
}

func newLab(t *testing.T, open Open, role string, settings lifecycle.Settings, files map[string]string, env ...string) *lab {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files["blaise.star"] = fmt.Sprintf("agent(command = %q, env = {%q: %q, \"DEMO_STATE\": %q})\n", exe, RoleEnv, roleDemoAgent, filepath.Join(dir, "demo")) + files["blaise.star"]
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(content, "$DIR", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clock := lifecycle.NewFakeClock(time.Now())
	l := &lab{t: t, dir: dir, clock: clock, settled: make(chan *lifecycle.Record, 16)}
	stderr, logs := &testsupport.Buffer{}, &testsupport.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("engine:\n%s\nsession processes:\n%s", logs, stderr)
		}
	})
	l.engine, l.agent = open(t, Setup{
		Dir:      dir,
		Clock:    clock,
		Settings: settings,
		Command:  []string{exe},
		// Race builds sleep a second at exit unless told not to.
		Env:    append(append(os.Environ(), RoleEnv+"="+role, "GORACE=atexit_sleep_ms=0"), env...),
		Stderr: stderr,
	})
	e := l.engine
	e.Settings, e.Clock, e.Dir = settings, clock, dir
	e.Log = log.New(logs)
	e.Settled = func(r *lifecycle.Record) { l.settled <- r }
	return l
}

func (l *lab) start() *engine.Live {
	l.t.Helper()
	live, err := l.engine.StartAgent(l.t.Context(), filepath.Join(l.dir, "blaise.star"), l.agent, "", l.engine.Settings)
	if err != nil {
		l.t.Fatal(err)
	}
	return live
}

// open initializes the agent and creates its ACP session.
func (l *lab) open(live *engine.Live) (*acptest.Client, string) {
	l.t.Helper()
	c := &acptest.Client{
		T:  l.t,
		In: live.Messages(),
		Out: func(line string) error {
			m, err := acp.Parse([]byte(line))
			if err != nil {
				return err
			}
			return live.Send(m)
		},
	}
	c.Initialize(`{}`)
	return c, c.NewSession(l.dir)
}

// wait waits for the run to be settled.
func (l *lab) wait(live *engine.Live) *lifecycle.Record {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(l.t.Context(), Patience)
	defer cancel()
	rec, err := live.Wait(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return rec
}

// until waits for a settled run whose record satisfies ok.
func (l *lab) until(ok func(*lifecycle.Record) bool) *lifecycle.Record {
	l.t.Helper()
	timeout := time.After(Patience)
	for {
		select {
		case rec := <-l.settled:
			if ok(rec) {
				return rec
			}
		case <-timeout:
			l.t.Fatal("no run settled as expected")
		}
	}
}

// waitClock waits until someone waits on the clock again: the code it
// drives has seen what came before.
func (l *lab) waitClock() {
	l.t.Helper()
	select {
	case <-l.clock.Waiting():
	case <-time.After(Patience):
		l.t.Fatal("nothing waits on the clock")
	}
}

// keep runs the engine's Keep for the test.
func (l *lab) keep() {
	ctx, cancel := context.WithCancel(l.t.Context())
	done := make(chan struct{})
	// Waited for at the lab's end (done).
	go func() { defer close(done); l.engine.Keep(ctx) }()
	l.t.Cleanup(func() { cancel(); <-done })
}

// pause starts a session and pauses it as idle.
func (l *lab) pause() *lifecycle.Record {
	l.t.Helper()
	live := l.start()
	l.open(live)
	if err := live.StopIdle(); err != nil {
		l.t.Fatal(err)
	}
	rec := l.wait(live)
	if rec.State != lifecycle.Paused {
		l.t.Fatalf("record %s", show(rec))
	}
	l.until(func(*lifecycle.Record) bool { return true })
	return rec
}

// L1: inactivity never counts while a turn runs; it counts, on the
// engine's clock, from the end of the turn.
func inactivityFromTheEndOfTheTurn(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{InactivityLimit: time.Minute}, map[string]string{})
	live := l.start()
	c, sid := l.open(live)
	c.Prompt(3, sid, "/permission")
	_, req := c.Until(acptest.RequestOf("session/request_permission"))
	l.clock.Advance(10 * time.Minute) // the turn waits on the client
	for len(l.clock.Waiting()) > 0 {
		<-l.clock.Waiting()
	}
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, req.ID))
	c.Until(acptest.ResponseTo("3"))
	l.waitClock() // the timers saw the turn end
	if rec, _ := l.engine.Store.Session(t.Context(), live.ID); rec.Stop != nil {
		t.Fatalf("stopped while a turn ran: %+v", rec.Stop)
	}
	l.clock.Advance(time.Minute)
	rec := l.wait(live)
	if rec.State != lifecycle.Paused || rec.Pause.Reason != lifecycle.Idle || !rec.Pause.MayResume || !rec.Stop.Delivered {
		t.Fatalf("record %s", show(rec))
	}
}

// L1: inactivity counts from the run's first report, once it can take
// messages: loading the plugs, however long it takes, does not count.
func inactivityFromTheFirstReport(t *testing.T, open Open) {
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLab(t, open, roleGated, lifecycle.Settings{InactivityLimit: time.Minute}, map[string]string{}, "GATE="+gate)
	// Ends once the run's timers wait on the clock.
	go func() {
		l.waitClock() // the run's timers wait
		l.clock.Advance(10 * time.Minute)
		if f, err := os.OpenFile(gate, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}()
	live := l.start()
	c, sid := l.open(live) // not stopped while it loaded
	if ms, _ := c.Turn(3, sid, "hello"); strings.Join(acptest.Chunks(ms), "") != "echo: hello" {
		t.Fatalf("answer %q", acptest.Chunks(ms))
	}
	l.clock.Advance(time.Minute)
	if rec := l.wait(live); rec.State != lifecycle.Paused || rec.Pause.Reason != lifecycle.Idle {
		t.Fatalf("record %s", show(rec))
	}
}

// L1, L7: the engine's settings win over the configuration's session(...),
// which the run reports once its plugs are loaded: the front end loads
// no plug.
func settingsUnderTheEngines(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{Timeout: time.Hour}, map[string]string{
		"blaise.star": `session(idle_policy = "end", timeout = "5m", inactivity_limit = "2m")`,
	})
	live := l.start()
	rec, err := l.engine.Store.Session(t.Context(), live.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Settings; s.IdlePolicy != lifecycle.PolicyEnd || s.Timeout != time.Hour || s.InactivityLimit != 2*time.Minute || s.PausedLifetime != lifecycle.DefaultPausedLifetime {
		t.Fatalf("settings %+v", s)
	}
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	if rec := l.wait(live); rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Completed {
		t.Fatalf("record %s", show(rec))
	}
}

// L4: under the end policy an idle session completes and is torn down.
func endPolicyIdleCompletes(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{IdlePolicy: lifecycle.PolicyEnd, InactivityLimit: time.Minute}, map[string]string{
		"blaise.star": `setup(use("./td.star"))`,
		"td.star": `plug(name = "td")
def on_session(ctx, next):
    next()
def on_teardown(ctx, next):
    info = next()
    ctx.runner.fs.write_file("$DIR/teardown", info.reason)
`,
	})
	live := l.start()
	l.open(live)
	l.clock.Advance(time.Minute)
	rec := l.wait(live)
	if rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Completed || rec.Pause.MayResume {
		t.Fatalf("record %s", show(rec))
	}
	if b, _ := os.ReadFile(filepath.Join(l.dir, "teardown")); string(b) != "completed" {
		t.Fatalf("teardown saw %q", b)
	}
}

// L4, L5: the run's timeout stops it as timeout, which does not resume.
func timeoutStopEnds(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{Timeout: 30 * time.Minute}, map[string]string{})
	live := l.start()
	c, sid := l.open(live)
	c.Prompt(3, sid, "/permission") // a turn: inactivity does not count
	c.Until(acptest.RequestOf("session/request_permission"))
	l.clock.Advance(30 * time.Minute)
	rec := l.wait(live)
	if rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Timeout || rec.Stop.Reason != lifecycle.Timeout {
		t.Fatalf("record %s", show(rec))
	}
}

// L5: a run that ignores its timeout stop is failed once the grace has
// passed on the engine's clock: killed, and settled as failed.
func ignoredTimeoutFails(t *testing.T, open Open) {
	l := newLab(t, open, roleDeaf, lifecycle.Settings{Timeout: 30 * time.Minute, TeardownAttempts: 1}, map[string]string{})
	l.engine.TimeoutGrace = time.Minute
	live := l.start()
	l.clock.Advance(30 * time.Minute)
	// Then a minute passes each time someone waits on the clock, until the
	// run is over: past the grace of its stop, then of its kill, whenever
	// the timers come to wait for them.
	// Ends with the run.
	go func() {
		for {
			select {
			case <-live.Done():
				return
			case <-l.clock.Waiting():
				l.clock.Advance(time.Minute)
			}
		}
	}()
	rec := l.wait(live)
	if rec.Pause == nil || rec.Pause.Reason != lifecycle.Failed || !strings.Contains(rec.Pause.Error, "without reporting its pause") || rec.Stop.Reason != lifecycle.Timeout {
		t.Fatalf("record %s", show(rec))
	}
}

// L6: a long-lived front end's engine (Keep) tears down a session whose
// paused lifetime passed, with reason expired, without any sweep.
func expiredTornDownByKeep(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{PausedLifetime: time.Hour}, map[string]string{
		"blaise.star": `setup(use("./td.star"))`,
		"td.star": `plug(name = "td")
def on_teardown(ctx, next):
    ctx.runner.fs.write_file("$DIR/teardown", next().reason)
`,
	})
	paused := l.pause()
	l.keep()
	l.clock.Advance(time.Hour + time.Minute)
	rec := l.until(func(r *lifecycle.Record) bool { return r.ID == paused.ID && r.State == lifecycle.Ended })
	if rec.EndReason != lifecycle.Expired {
		t.Fatalf("record %s", show(rec))
	}
	if b, _ := os.ReadFile(filepath.Join(l.dir, "teardown")); string(b) != "expired" {
		t.Fatalf("teardown saw %q", b)
	}
}

// L2: a failing teardown is retried by Keep after its backoff, on the
// engine's clock, until the session is orphaned.
func teardownRetriedThenOrphaned(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{TeardownAttempts: 2, TeardownBackoff: time.Minute}, map[string]string{
		"blaise.star": `setup(use("./bad.star"))`,
		"bad.star": `plug(name = "bad")
def on_teardown(ctx, next):
    next()
    fail("cannot clean up")
`,
	})
	paused := l.pause()
	l.keep()
	rec, err := l.engine.End(l.t.Context(), paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	l.until(func(*lifecycle.Record) bool { return true })
	if rec.State != lifecycle.TearingDown || rec.Teardown.Attempts != 1 {
		t.Fatalf("after the first teardown: %+v", rec)
	}
	l.clock.Advance(2 * time.Minute)
	rec = l.until(func(r *lifecycle.Record) bool { return r.ID == paused.ID && r.State != lifecycle.TearingDown })
	if rec.State != lifecycle.Orphaned || rec.Teardown.Attempts != 2 || !strings.Contains(rec.Teardown.LastError, "cannot clean up") {
		t.Fatalf("record %s", show(rec))
	}
}

// L7, C12: a chain that cannot resume is never paused: idle ends it.
func unresumableNeverPaused(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{InactivityLimit: time.Minute}, map[string]string{
		"blaise.star": `setup(use("./once.star"))`,
		"once.star": `plug(name = "once", resumable = False)
def on_session(ctx, next):
    next()
`,
	})
	live := l.start()
	l.open(live)
	l.clock.Advance(time.Minute)
	rec := l.wait(live)
	if rec.State != lifecycle.Ended || rec.Resumable || rec.Pause.MayResume || rec.Stop.MayResume {
		t.Fatalf("record %s", show(rec))
	}
}

// L3: a stop is recorded before it is sent and reaches only a run that
// takes it: once the run has ended, a stop is an error and changes nothing.
func stopNoRunReceives(t *testing.T, open Open) {
	l := newLab(t, open, roleSessionProcess, lifecycle.Settings{}, map[string]string{})
	live := l.start()
	c, sid := l.open(live)
	c.Prompt(3, sid, "/exit 3") // the agent dies: the run ends on its own
	before := l.wait(live)
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); !errors.Is(err, engine.ErrNoRun) {
		t.Fatalf("stop after the run: %v", err)
	}
	after, err := l.engine.Store.Session(t.Context(), live.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != lifecycle.Paused || after.Pause.Reason != lifecycle.Failed || after.Stop != nil || !after.Updated.Equal(before.Updated) {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Failed}); err == nil || !strings.Contains(err.Error(), "is not a stop reason") {
		t.Fatalf("a failed stop: %v", err)
	}
}

// show is rec with its stop and pause, which %+v gives as pointers.
func show(rec *lifecycle.Record) string {
	s := fmt.Sprintf("%+v", *rec)
	if rec.Stop != nil {
		s += fmt.Sprintf("\nstop %+v", *rec.Stop)
	}
	if rec.Pause != nil {
		s += fmt.Sprintf("\npause %+v", *rec.Pause)
	}
	return s
}
