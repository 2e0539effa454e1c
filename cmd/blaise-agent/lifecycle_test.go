package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// self is a link named blaise-agent to the test binary, which testscript's
// Main runs as the real command under that name.
func self(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "blaise-agent")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// lab is a state directory, a configuration around the demo agent, and an
// engine with short settings.
type lab struct {
	t      *testing.T
	dir    string
	engine *engine.Engine
	logs   *testsupport.Buffer
}

func newLab(t *testing.T, settings lifecycle.Settings, files map[string]string) *lab {
	t.Helper()
	bin := self(t)
	dir := t.TempDir()
	files["blaise.star"] = fmt.Sprintf("agent(command = %q, args = [\"demo-agent\", \"--state-dir\", %q])\n", bin, filepath.Join(dir, "demo")) + files["blaise.star"]
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(content, "$DIR", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := filestore.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testsupport.Buffer{}
	l := &lab{t: t, dir: dir, logs: logs, engine: &engine.Engine{
		Store:        store,
		Command:      []string{bin, "session-process"},
		Settings:     settings,
		TimeoutGrace: 3 * time.Second,
		Stderr:       logs,
		LogArgs:      []string{"--log-level", "debug"},
		Log:          log.New(logs),
	}}
	return l
}

// stateDir is the lab's state directory.
func (l *lab) stateDir() string { return filepath.Join(l.dir, "state") }

// acpSession is a raw ACP client of a live session.
type acpSession struct {
	*acptest.Client
	sid string
}

// open initializes and creates (or, with acpID, loads) the ACP session.
func (l *lab) open(live *engine.Live, acpID string) *acpSession {
	l.t.Helper()
	s := &acpSession{Client: &acptest.Client{
		T:  l.t,
		In: live.Messages(),
		Out: func(line string) error {
			m, err := acp.Parse([]byte(line))
			if err != nil {
				return err
			}
			return live.Send(m)
		},
		Logs: l.logs.String,
	}}
	s.Initialize(`{}`)
	if acpID == "" {
		s.sid = s.NewSession(l.dir)
	} else {
		s.sid = acpID
		s.LoadSession(2, acpID, l.dir)
		s.Until(acptest.ResponseTo("2"))
	}
	return s
}

// prompt sends a prompt and returns the texts of the agent_message_chunks
// before its response.
func (s *acpSession) prompt(id int, text string) []string {
	s.T.Helper()
	before, _ := s.Turn(id, s.sid, text)
	return acptest.Chunks(before)
}

func (l *lab) wait(live *engine.Live) *lifecycle.Record {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := live.Wait(ctx)
	if err != nil {
		l.t.Fatalf("wait: %v\nlogs:\n%s", err, l.logs)
	}
	return rec
}

const counterPlug = `plug(name = "counter", persisted = schema.object(n = schema.int()))

def on_session(ctx, next):
    v = ctx.persisted.value
    n = (v.n if v else 0) + 1
    ctx.persisted.set({"n": n})
    ctx.runner.fs.write_file("$DIR/run-%d" % ctx.run.number, "n=%d kind=%s" % (n, ctx.run.kind))
    next()

def on_teardown(ctx, next):
    info = next()
    ctx.runner.fs.write_file("$DIR/teardown", "reason=%s" % info.reason)
`

func counterLab(t *testing.T, settings lifecycle.Settings) *lab {
	return newLab(t, settings, map[string]string{
		"blaise.star":  `setup(use("./counter.star", id = "c"))`,
		"counter.star": counterPlug,
	})
}

func (l *lab) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(l.dir, name))
	return string(b)
}

func TestL4_IdlePausesAndResumeSeesPersistedState(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{InactivityLimit: 300 * time.Millisecond})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	s := l.open(live, "")
	if got := strings.Join(s.prompt(3, "first"), "|"); got != "echo: first" {
		t.Fatalf("chunks %q", got)
	}
	rec := l.wait(live) // the inactivity limit passes: idle
	if rec.State != lifecycle.Paused || rec.Pause.Reason != "idle" || !rec.Pause.MayResume || rec.Stop == nil || !rec.Stop.Delivered {
		t.Fatalf("after idle: %+v", rec)
	}
	if rec.ExpiresAt.Sub(rec.PausedAt) != lifecycle.DefaultPausedLifetime {
		t.Fatalf("paused lifetime %s", rec.ExpiresAt.Sub(rec.PausedAt))
	}
	live, err = l.engine.Resume(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	s = l.open(live, rec.ACPSessionID)
	if got := strings.Join(s.prompt(3, "second"), "|"); got != "echo: second" {
		t.Fatalf("chunks %q", got)
	}
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	rec = l.wait(live)
	if rec.State != lifecycle.Paused || rec.Runs != 2 {
		t.Fatalf("after run 2: %+v", rec)
	}
	if got := l.file("run-2"); got != "n=2 kind=resume" {
		t.Fatalf("run 2 saw %q", got)
	}
}

func TestL1_InactivityNeverCountsWhileATurnRuns(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{InactivityLimit: 200 * time.Millisecond})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	s := l.open(live, "")
	// The turn takes longer than the inactivity limit, without a message.
	if got := strings.Join(s.prompt(3, "/sleep 700\nawake"), "|"); got != "echo: awake" {
		t.Fatalf("chunks %q", got)
	}
	rec := l.wait(live)
	if rec.Pause.Reason != "idle" {
		t.Fatalf("pause %+v", rec.Pause)
	}
}

func TestL4_EndPolicyCompletesAndTearsDown(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{IdlePolicy: lifecycle.PolicyEnd, InactivityLimit: 200 * time.Millisecond})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "").prompt(3, "hi")
	rec := l.wait(live)
	if rec.State != lifecycle.Ended || rec.EndReason != "completed" || rec.Pause.MayResume {
		t.Fatalf("record %+v", rec)
	}
	if got := l.file("teardown"); got != "reason=completed" {
		t.Fatalf("teardown saw %q", got)
	}
	if ids, _ := l.engine.Store.PersistedIDs(t.Context(), rec.ID); len(ids) != 0 {
		t.Fatalf("persisted state left: %v", ids)
	}
}

func TestL2_ClosedWhileActiveAndWhilePaused(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "").prompt(3, "hi")
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil {
		t.Fatal(err)
	}
	if rec := l.wait(live); rec.State != lifecycle.Ended || l.file("teardown") != "reason=closed" {
		t.Fatalf("closed while active: %+v, %q", rec, l.file("teardown"))
	}

	live, err = l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "").prompt(3, "hi")
	_ = live.StopIdle()
	paused := l.wait(live)
	if paused.State != lifecycle.Paused {
		t.Fatalf("not paused: %+v", paused)
	}
	os.Remove(filepath.Join(l.dir, "teardown"))
	rec, err := l.engine.End(context.Background(), paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.Ended || l.file("teardown") != "reason=closed" || rec.Runs != 2 {
		t.Fatalf("closed while paused: %+v, %q", rec, l.file("teardown"))
	}
}

func TestL6_ExpiredPausedSessionGetsTeardownRun(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{PausedLifetime: 100 * time.Millisecond})
	// The engine's time, moved past the lifetime once the session paused.
	clock := lifecycle.NewFakeClock(time.Now())
	l.engine.Clock = clock
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "").prompt(3, "hi")
	_ = live.StopIdle()
	rec := l.wait(live)
	clock.Advance(time.Hour)
	if err := l.engine.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec, _ = l.engine.Store.Session(t.Context(), rec.ID)
	if rec.State != lifecycle.Ended || rec.EndReason != "expired" || l.file("teardown") != "reason=expired" {
		t.Fatalf("record %+v teardown %q", rec, l.file("teardown"))
	}
}

func TestL5_TimeoutAndARunIgnoringIt(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{Timeout: 3 * time.Second})
	l.engine.TimeoutGrace = time.Minute // this run obeys its stop
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "")
	rec := l.wait(live)
	if rec.State != lifecycle.Ended || rec.Pause.Reason != "timeout" || rec.Pause.MayResume {
		t.Fatalf("timeout: %+v", rec)
	}

	// Ignored, the stop fails the run after the grace: SIGTERM shuts it
	// down, its plugs' processes with it. The timeout
	// leaves the run time to start on a busy machine: it counts from the
	// start, and a run stopped before its first report fails Start instead.
	stubborn := newLab(t, lifecycle.Settings{Timeout: 3 * time.Second}, map[string]string{
		"blaise.star": `setup(use("./stubborn.star"))`,
		"stubborn.star": `plug(name = "stubborn")
def on_session(ctx, next):
    ` + spawnChildPlug + `
    next()
    ctx.runner.exec(["sleep", "600"])
`,
	})
	stubborn.engine.TimeoutGrace = 500 * time.Millisecond
	stubborn.engine.StopGrace = 300 * time.Millisecond
	live, err = stubborn.engine.Start(t.Context(), filepath.Join(stubborn.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	rec = stubborn.wait(live)
	if rec.Pause == nil || rec.Pause.Reason != "failed" || rec.State != lifecycle.Ended {
		t.Fatalf("ignored timeout: %+v", rec.Pause)
	}
	if !stubborn.childGone() {
		t.Fatal("the handler's child outlived its run")
	}
}

func TestL2_TeardownFailingUntilOrphanedThenResolved(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{TeardownBackoff: time.Minute, TeardownAttempts: 3}, map[string]string{
		"blaise.star": `setup(use("./stuck.star"))`,
		"stuck.star": `plug(name = "stuck")
def on_teardown(ctx, next):
    next()
    fail("cannot remove the worktree")
`,
	})
	// The engine's time, moved past each retry's backoff.
	clock := lifecycle.NewFakeClock(time.Now())
	l.engine.Clock = clock
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "")
	_ = live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	rec := l.wait(live)
	for i := 0; i < 5 && rec.State == lifecycle.TearingDown; i++ {
		clock.Advance(time.Hour)
		// A sweep leaves a session whose last run's process still holds
		// its run lock, as it exits: it is swept again until it retries.
		before := rec.Teardown.Attempts
		testsupport.Eventually(t, "a sweep that retries the teardown", func() bool {
			_ = l.engine.Sweep(context.Background())
			rec, _ = l.engine.Store.Session(t.Context(), rec.ID)
			return rec.Teardown.Attempts > before || rec.State != lifecycle.TearingDown
		})
	}
	if rec.State != lifecycle.Orphaned || rec.Teardown.Attempts != 3 || !strings.Contains(rec.Teardown.LastError, "cannot remove the worktree") {
		t.Fatalf("record %+v", rec)
	}
	if rec, err = l.engine.Resolve(t.Context(), rec.ID); err != nil || rec.State != lifecycle.Ended {
		t.Fatalf("resolve: %+v %v", rec, err)
	}
}

// L2: resolving is for orphaned sessions; a session with a live run says
// so, not that another process tears it down.
func TestL2_ResolvingALiveSessionSaysOnlyOrphanedOnesResolve(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `setup()`})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "")
	_, err = l.engine.Resolve(t.Context(), live.ID)
	if err == nil || !strings.Contains(err.Error(), "session "+live.ID+" is active; only an orphaned session can be resolved") {
		t.Fatalf("resolving a live session: %v", err)
	}
	_ = live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	if rec := l.wait(live); rec.State != lifecycle.Ended {
		t.Fatalf("after the refused resolve and a close: %+v", rec)
	}
}

func TestL7_UnresumableChainIsNeverPaused(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{InactivityLimit: 200 * time.Millisecond}, map[string]string{
		"blaise.star": `setup(use("./once.star"))`,
		"once.star": `plug(name = "once", resumable = False)
def on_session(ctx, next):
    next()
`,
	})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "").prompt(3, "hi")
	rec := l.wait(live)
	if rec.Resumable || rec.State != lifecycle.Ended || rec.Pause.Reason != "idle" || rec.Pause.MayResume {
		t.Fatalf("record %+v", rec)
	}
}

func TestL3_EndingARunNoOneHoldsFailsAndChangesNothing(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	l.open(live, "")
	before, _ := l.engine.Store.Session(t.Context(), live.ID)
	if _, err := l.engine.End(context.Background(), live.ID); err == nil {
		t.Fatal("ending a run held by another front end succeeded")
	}
	after, _ := l.engine.Store.Session(t.Context(), live.ID)
	if after.State != before.State || after.Stop != nil {
		t.Fatalf("the record changed: %+v", after)
	}
	_ = live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	l.wait(live)
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil {
		t.Fatalf("a second stop: %v", err)
	}
}

// soleSession waits until the store holds one session, in state, and
// returns it.
func (l *lab) soleSession(state lifecycle.State) *lifecycle.Record {
	l.t.Helper()
	var recs []*lifecycle.Record
	if !testsupport.Wait(func() bool {
		recs, _ = l.engine.Store.Sessions(l.t.Context())
		return len(recs) == 1 && recs[0].State == state
	}) {
		l.t.Fatalf("no sole %s session: %+v\nlogs:\n%s", state, recs, l.logs)
	}
	return recs[0]
}

// killMidTurn starts a session, begins a long turn, and kills its session
// process with SIGKILL; it returns the record after the front end settled
// it and the agent's pid.
func killMidTurn(t *testing.T, l *lab) (*lifecycle.Record, int) {
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	s := l.open(live, "")
	s.Prompt(3, s.sid, "/sleep 60000")
	rec, _ := l.engine.Store.Session(t.Context(), live.ID)
	agents := testsupport.Children(rec.PID)
	if len(agents) != 1 {
		t.Fatalf("session process %d has children %v", rec.PID, agents)
	}
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return l.wait(live), agents[0]
}

func TestL7_SessionProcessKilledMidTurnIsFailedAndItsAgentReaped(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	rec, agent := killMidTurn(t, l)
	if rec.State != lifecycle.Paused || rec.Pause.Reason != "failed" || !strings.Contains(rec.Pause.Error, "without reporting its pause") {
		t.Fatalf("record %+v pause %+v", rec, rec.Pause)
	}
	testsupport.WaitGone(t, agent, "the agent of the killed session process")
	// Pause policy: the environment is kept, and the session resumes.
	live, err := l.engine.Resume(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	_ = live.StopIdle()
	if rec := l.wait(live); rec.State != lifecycle.Paused || rec.Runs != 2 {
		t.Fatalf("after resume: %+v", rec)
	}
}

func TestL7_SessionProcessKilledUnderEndPolicyTearsDown(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{IdlePolicy: lifecycle.PolicyEnd})
	rec, _ := killMidTurn(t, l)
	if rec.State != lifecycle.Ended || rec.EndReason != "failed" || l.file("teardown") != "reason=failed" {
		t.Fatalf("record %+v teardown %q", rec, l.file("teardown"))
	}
}

// killFrontEndAfterATurn runs `blaise-agent run` interactively, has it
// answer one prompt, and kills it with SIGKILL while the session is live.
func (l *lab) killFrontEndAfterATurn() {
	l.t.Helper()
	cmd := exec.Command(self(l.t), "run", "-c", filepath.Join(l.dir, "blaise.star"), "--state-dir", l.stateDir())
	cmd.Dir = l.dir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = l.logs
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	io.WriteString(stdin, "hello\n")
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), "echo: hello") {
	}
	if err := cmd.Process.Kill(); err != nil {
		l.t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestL9_FrontEndKilledThenANewOneResumes(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	l.killFrontEndAfterATurn()
	// The session process lost its front end: it stops as idle and pauses.
	var rec *lifecycle.Record
	rec = l.soleSession(lifecycle.Paused)
	if rec.Pause.Reason != "idle" {
		t.Fatalf("pause %+v", rec.Pause)
	}
	live, err := l.engine.Resume(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := l.open(live, rec.ACPSessionID)
	if got := strings.Join(s.prompt(3, "again"), "|"); !strings.HasSuffix(got, "echo: again") {
		t.Fatalf("chunks %q", got)
	}
	_ = live.StopIdle()
	l.wait(live)
	if got := l.file("run-2"); got != "n=2 kind=resume" {
		t.Fatalf("run 2 saw %q", got)
	}
}

func TestL1_SettingsFromTheConfigurationUnderFlags(t *testing.T) {
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "3600000")
	l := counterLab(t, lifecycle.Settings{Timeout: 42 * time.Minute})
	cfg := filepath.Join(l.dir, "blaise.star")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("\nsession(idle_policy = \"end\", paused_lifetime = \"48h\", inactivity_limit = \"90s\", timeout = \"10m\")\n")...), 0o644)
	live, err := l.engine.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := l.engine.Store.Session(t.Context(), live.ID)
	want := lifecycle.Settings{IdlePolicy: lifecycle.PolicyEnd, PausedLifetime: time.Hour, InactivityLimit: 90 * time.Second, Timeout: 42 * time.Minute, StartupLimit: lifecycle.DefaultStartupLimit, TeardownBackoff: lifecycle.DefaultTeardownBackoff, TeardownAttempts: lifecycle.DefaultTeardownAttempts}
	if rec.Settings != want {
		t.Fatalf("settings %+v, want %+v (the cap, the file, the flag)", rec.Settings, want)
	}
	_ = live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	l.wait(live)
}

func TestL9_LostFrontEndEndsAChainThatCannotResume(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{
		"blaise.star": `setup(use("./once.star"))`,
		"once.star": `plug(name = "once", resumable = False)
def on_session(ctx, next):
    next()
def on_teardown(ctx, next):
    info = next()
    ctx.runner.fs.write_file("$DIR/teardown", "reason=%s" % info.reason)
`,
	})
	l.killFrontEndAfterATurn()
	if rec := l.soleSession(lifecycle.Ended); rec.Pause.MayResume || l.file("teardown") != "reason=idle" {
		t.Fatalf("pause %+v teardown %q", rec.Pause, l.file("teardown"))
	}
}

func TestL7_StoredStateOfNoPlugIsReportedOrphaned(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	cfg := filepath.Join(l.dir, "blaise.star")
	live, err := l.engine.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = live.StopIdle()
	rec := l.wait(live)
	if len(rec.OrphanedState) != 0 {
		t.Fatalf("orphans in run 1: %v", rec.OrphanedState)
	}
	// The configuration now names the plug "k": what "c" stored is no one's.
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `id = "c"`, `id = "k"`, 1)), 0o644)
	live, err = l.engine.Resume(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	_ = live.StopIdle()
	rec = l.wait(live)
	if strings.Join(rec.OrphanedState, ",") != "c" || !strings.Contains(l.logs.String(), "stored plug state belongs to no plug of the configuration") {
		t.Fatalf("orphaned state %v\n%s", rec.OrphanedState, l.logs)
	}
}
