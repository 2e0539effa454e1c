package blaise_test

// The lifecycle rules (L1–L9) on the engine, with a fake clock: the
// engine's timers and Keep wait on it, so a test moves time by hand and
// waits on events (a run settled, the clock waited on), never on sleeps.
// Session processes are real: the test binary, with
// BLAISE_TEST_ROLE=session-process, serves runner.SessionProcess, and, with
// BLAISE_TEST_ROLE=demo-agent, the demo agent.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/charmbracelet/log"
)

const roleEnv = "BLAISE_TEST_ROLE"

func TestMain(m *testing.M) {
	if job := os.Getenv(blaise.StoreChildEnv); job != "" {
		if err := blaise.StoreChild(job); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch os.Getenv(roleEnv) {
	case "demo-agent":
		if err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{StateDir: os.Getenv("DEMO_STATE"), Log: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "session-process":
		os.Exit(serveSessionProcess(false))
	case "deaf-session-process":
		os.Exit(serveSessionProcess(true))
	case "gated-session-process":
		// Loads its plugs once the test opens and closes the gate.
		gate, err := os.Open(os.Getenv("GATE"))
		if err == nil {
			_, err = io.Copy(io.Discard, gate)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(serveSessionProcess(false))
	}
	os.Exit(m.Run())
}

// serveSessionProcess parses the arguments Engine.launch passes, as
// `blaise-agent session-process` does, and serves the run. A deaf one
// reports its plugs loaded and then nothing: a run that ignores its stops.
func serveSessionProcess(deaf bool) int {
	fs := flag.NewFlagSet("session-process", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "")
	id := fs.String("session", "", "")
	kind := fs.String("kind", "", "")
	number := fs.Int("run", 0, "")
	endReason := fs.String("end-reason", "", "")
	stopGrace := fs.Duration("stop-grace", 0, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if deaf {
		if session.Kind(*kind) == session.TeardownRun {
			return 0
		}
		ctl := blaise.NewControlConn(os.NewFile(3, "control"), os.NewFile(3, "control"))
		_ = ctl.Send(session.Control{Kind: session.ControlLoaded, Run: *number, Loaded: &session.Loaded{Resumable: true, Settings: session.DefaultSettings()}})
		select {}
	}
	err := runner.ServeInherited(&runner.SessionProcess{
		SessionID: *id,
		Kind:      session.Kind(*kind),
		Run:       *number,
		EndReason: session.Reason(*endReason),
		Logger:    log.New(os.Stderr),
		StopGrace: *stopGrace,
	}, *stateDir, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lab is a state directory, a configuration around the demo agent, and an
// engine on a fake clock.
type lab struct {
	t       *testing.T
	dir     string
	clock   *session.FakeClock
	engine  *blaise.Engine
	settled chan *session.Record
}

func newLab(t *testing.T, role string, settings session.Settings, files map[string]string) *lab {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files["blaise.star"] = fmt.Sprintf("agent(command = %q, env = {%q: \"demo-agent\", \"DEMO_STATE\": %q})\n", exe, roleEnv, filepath.Join(dir, "demo")) + files["blaise.star"]
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(content, "$DIR", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := blaise.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	clock := session.NewFakeClock(time.Now())
	store.Clock = clock
	l := &lab{t: t, dir: dir, clock: clock, settled: make(chan *session.Record, 16)}
	l.engine = &blaise.Engine{
		Store:    store,
		Command:  []string{exe},
		Settings: settings,
		Dir:      dir,
		// Race builds sleep a second at exit unless told not to.
		Env:     append(os.Environ(), roleEnv+"="+role, "GORACE=atexit_sleep_ms=0"),
		Stderr:  &testsupport.Buffer{},
		Log:     log.New(&testsupport.Buffer{}),
		Clock:   clock,
		Settled: func(r *session.Record) { l.settled <- r },
	}
	return l
}

func (l *lab) start() *blaise.Live {
	l.t.Helper()
	live, err := l.engine.Start(filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		l.t.Fatal(err)
	}
	return live
}

// open initializes the agent and creates its ACP session.
func (l *lab) open(live *blaise.Live) (*acptest.Client, string) {
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
func (l *lab) wait(live *blaise.Live) *session.Record {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec, err := live.Wait(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return rec
}

// until waits for a settled run whose record satisfies ok.
func (l *lab) until(ok func(*session.Record) bool) *session.Record {
	l.t.Helper()
	timeout := time.After(20 * time.Second)
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
	case <-time.After(20 * time.Second):
		l.t.Fatal("nothing waits on the clock")
	}
}

// keep runs the engine's Keep for the test.
func (l *lab) keep() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.engine.Keep(ctx) }()
	l.t.Cleanup(func() { cancel(); <-done })
}

// L1: inactivity never counts while a turn runs; it counts, on the
// engine's clock, from the end of the turn.
func TestL1_InactivityCountsFromTheEndOfTheTurnOnTheEngineClock(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{InactivityLimit: time.Minute}, map[string]string{})
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
	if rec, _ := l.engine.Store.Session(live.ID); rec.Stop != nil {
		t.Fatalf("stopped while a turn ran: %+v", rec.Stop)
	}
	l.clock.Advance(time.Minute)
	rec := l.wait(live)
	if rec.State != session.Paused || rec.Pause.Reason != session.Idle || !rec.Pause.MayResume || !rec.Stop.Delivered {
		t.Fatalf("record %+v", rec)
	}
}

// L1: inactivity counts from the run's first report, once it can take
// messages: loading the plugs, however long it takes, does not count.
func TestL1_InactivityCountsFromTheRunsFirstReport(t *testing.T) {
	l := newLab(t, "gated-session-process", session.Settings{InactivityLimit: time.Minute}, map[string]string{})
	gate := filepath.Join(l.dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	l.engine.Env = append(l.engine.Env, "GATE="+gate)
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
	if rec := l.wait(live); rec.State != session.Paused || rec.Pause.Reason != session.Idle {
		t.Fatalf("record %+v", rec)
	}
}

// L1, L7: the engine's settings win over the configuration's session(...),
// which the run reports once its plugs are loaded: the front end loads
// no plug.
func TestL1_SettingsOfTheConfigurationUnderTheEngines(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{Timeout: time.Hour}, map[string]string{
		"blaise.star": `session(idle_policy = "end", timeout = "5m", inactivity_limit = "2m")`,
	})
	live := l.start()
	rec, err := l.engine.Store.Session(live.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Settings; s.IdlePolicy != session.PolicyEnd || s.Timeout != time.Hour || s.InactivityLimit != 2*time.Minute || s.PausedLifetime != session.DefaultPausedLifetime {
		t.Fatalf("settings %+v", s)
	}
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	if rec := l.wait(live); rec.State != session.Ended || rec.EndReason != session.Completed {
		t.Fatalf("record %+v", rec)
	}
}

// L4: under the end policy an idle session completes and is torn down.
func TestL4_EndPolicyIdleCompletesAndTearsDown(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{IdlePolicy: session.PolicyEnd, InactivityLimit: time.Minute}, map[string]string{
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
	if rec.State != session.Ended || rec.EndReason != session.Completed || rec.Pause.MayResume {
		t.Fatalf("record %+v", rec)
	}
	if b, _ := os.ReadFile(filepath.Join(l.dir, "teardown")); string(b) != "completed" {
		t.Fatalf("teardown saw %q", b)
	}
}

// L4, L5: the run's timeout stops it as timeout, which does not resume.
func TestL5_TimeoutStopEndsTheSession(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{Timeout: 30 * time.Minute}, map[string]string{})
	live := l.start()
	c, sid := l.open(live)
	c.Prompt(3, sid, "/permission") // a turn: inactivity does not count
	c.Until(acptest.RequestOf("session/request_permission"))
	l.clock.Advance(30 * time.Minute)
	rec := l.wait(live)
	if rec.State != session.Ended || rec.EndReason != session.Timeout || rec.Stop.Reason != session.Timeout {
		t.Fatalf("record %+v", rec)
	}
}

// L5: a run that ignores its timeout stop is failed once the grace has
// passed on the engine's clock: killed, and settled as failed.
func TestL5_ARunIgnoringItsTimeoutIsKilledAndFailed(t *testing.T) {
	l := newLab(t, "deaf-session-process", session.Settings{Timeout: 30 * time.Minute, TeardownAttempts: 1}, map[string]string{})
	l.engine.TimeoutGrace = time.Minute
	live := l.start()
	l.clock.Advance(30 * time.Minute)
	for {
		if rec, _ := l.engine.Store.Session(live.ID); rec.Stop != nil {
			break
		}
		l.waitClock() // the timers went to sleep again
	}
	l.clock.Advance(time.Minute)
	rec := l.wait(live)
	if rec.Pause == nil || rec.Pause.Reason != session.Failed || !strings.Contains(rec.Pause.Error, "without reporting its pause") || rec.Stop.Reason != session.Timeout {
		t.Fatalf("record %+v", rec)
	}
}

// pause starts a session and pauses it as idle.
func (l *lab) pause() *session.Record {
	l.t.Helper()
	live := l.start()
	l.open(live)
	if err := live.StopIdle(); err != nil {
		l.t.Fatal(err)
	}
	rec := l.wait(live)
	if rec.State != session.Paused {
		l.t.Fatalf("record %+v", rec)
	}
	l.until(func(*session.Record) bool { return true })
	return rec
}

// L6: a long-lived front end's engine (Keep) tears down a session whose
// paused lifetime passed, with reason expired, without any sweep.
func TestL6_ExpiredSessionTornDownByKeepWithoutSweep(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{PausedLifetime: time.Hour}, map[string]string{
		"blaise.star": `setup(use("./td.star"))`,
		"td.star": `plug(name = "td")
def on_teardown(ctx, next):
    ctx.runner.fs.write_file("$DIR/teardown", next().reason)
`,
	})
	paused := l.pause()
	l.keep()
	l.clock.Advance(time.Hour + time.Minute)
	rec := l.until(func(r *session.Record) bool { return r.ID == paused.ID && r.State == session.Ended })
	if rec.EndReason != session.Expired {
		t.Fatalf("record %+v", rec)
	}
	if b, _ := os.ReadFile(filepath.Join(l.dir, "teardown")); string(b) != "expired" {
		t.Fatalf("teardown saw %q", b)
	}
}

// L2: a failing teardown is retried by Keep after its backoff, on the
// engine's clock, until the session is orphaned.
func TestL2_TeardownRetriedByKeepThenOrphaned(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{TeardownAttempts: 2, TeardownBackoff: time.Minute}, map[string]string{
		"blaise.star": `setup(use("./bad.star"))`,
		"bad.star": `plug(name = "bad")
def on_teardown(ctx, next):
    next()
    fail("cannot clean up")
`,
	})
	paused := l.pause()
	l.keep()
	rec, err := l.engine.End(context.Background(), paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	l.until(func(*session.Record) bool { return true })
	if rec.State != session.TearingDown || rec.Teardown.Attempts != 1 {
		t.Fatalf("after the first teardown: %+v", rec)
	}
	l.clock.Advance(2 * time.Minute)
	rec = l.until(func(r *session.Record) bool { return r.ID == paused.ID && r.State != session.TearingDown })
	if rec.State != session.Orphaned || rec.Teardown.Attempts != 2 || !strings.Contains(rec.Teardown.LastError, "cannot clean up") {
		t.Fatalf("record %+v", rec)
	}
}

// L7, C12: a chain that cannot resume is never paused: idle ends it.
func TestL7_UnresumableChainIsNeverPaused(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{InactivityLimit: time.Minute}, map[string]string{
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
	if rec.State != session.Ended || rec.Resumable || rec.Pause.MayResume || rec.Stop.MayResume {
		t.Fatalf("record %+v", rec)
	}
}

// L3: a stop is recorded before it is sent and reaches only a run that
// takes it: once the run has ended, a stop is an error and changes nothing.
func TestL3_AStopNoRunReceivesIsAnErrorAndChangesNothing(t *testing.T) {
	l := newLab(t, "session-process", session.Settings{}, map[string]string{})
	live := l.start()
	c, sid := l.open(live)
	c.Prompt(3, sid, "/exit 3") // the agent dies: the run ends on its own
	before := l.wait(live)
	if err := live.Stop(session.Stop{Reason: session.Closed}); !errors.Is(err, blaise.ErrNoRun) {
		t.Fatalf("stop after the run: %v", err)
	}
	after, err := l.engine.Store.Session(live.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != session.Paused || after.Pause.Reason != session.Failed || after.Stop != nil || !after.Updated.Equal(before.Updated) {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	if err := live.Stop(session.Stop{Reason: session.Failed}); err == nil || !strings.Contains(err.Error(), "is not a stop reason") {
		t.Fatalf("a failed stop: %v", err)
	}
}
