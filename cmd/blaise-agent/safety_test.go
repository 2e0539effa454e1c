package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// paused starts a session and pauses it (idle).
func (l *lab) paused() *lifecycle.Record {
	l.t.Helper()
	live, err := l.engine.Start(l.t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		l.t.Fatal(err)
	}
	_ = live.StopIdle()
	return l.wait(live)
}

// TestL2_TwoResumesAndASweepAtOnceOneRunProceeds: two resumes of a paused
// session and a sweep at the same moment, fifty times: exactly one resume
// proceeds, the other is told the session is active and changes nothing, and
// the sweep never takes the starting run for a dead one. The fifty rounds
// are ten on each of five sessions, each of its own state directory, which
// go on at once.
func TestL2_TwoResumesAndASweepAtOnceOneRunProceeds(t *testing.T) {
	t.Parallel()
	for s := range 5 {
		t.Run(fmt.Sprintf("session%d", s+1), func(t *testing.T) {
			t.Parallel()
			twoResumesAndASweep(t, 10)
		})
	}
}

// twoResumesAndASweep plays rounds of TestL2_TwoResumesAndASweepAtOnceOneRunProceeds
// on a session of its own.
func twoResumesAndASweep(t *testing.T, rounds int) {
	l := counterLab(t, lifecycle.Settings{})
	rec := l.paused()
	for i := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var lives [2]*engine.Live
		var errs [3]error
		for j := range lives {
			wg.Go(func() { <-start; lives[j], errs[j] = l.engine.Resume(t.Context(), rec.ID) })
		}
		wg.Go(func() { <-start; errs[2] = l.engine.Sweep(context.Background()) })
		close(start)
		wg.Wait()
		if errs[2] != nil {
			t.Fatalf("round %d: sweep: %v", i, errs[2])
		}
		var winner *engine.Live
		for j, lv := range lives {
			switch {
			case lv != nil && winner == nil:
				winner = lv
			case lv != nil:
				t.Fatalf("round %d: both resumes proceeded", i)
			case !strings.Contains(errs[j].Error(), "session "+rec.ID+" is active"):
				t.Fatalf("round %d: the other resume: %v", i, errs[j])
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no resume proceeded: %v", i, errs)
		}
		mid, err := l.engine.Store.Session(t.Context(), rec.ID)
		if err != nil || mid.State != lifecycle.Active || mid.Runs != rec.Runs+1 || mid.Pause.Reason != "idle" {
			t.Fatalf("round %d: while the run starts: %+v %v (pause %+v)", i, mid, err, mid.Pause)
		}
		_ = winner.StopIdle()
		next := l.wait(winner)
		if next.State != lifecycle.Paused || next.Runs != rec.Runs+1 || next.Pause.Reason != "idle" || next.Pause.Run != next.Runs {
			t.Fatalf("round %d: after the run: %+v (pause %+v)", i, next, next.Pause)
		}
		rec = next
	}
}

// TestL2_TwoRunCommandsOfOneSessionAtOnceOneProceeds, through the binary: two
// `run --session ID` at once, each sweeping at its start, and a `sessions
// sweep`. The one that gets the session holds it until its person leaves (the
// end of its input); the other fails at once, saying the session is active.
// Ten rounds, five on each of two sessions of their own, which go on at once.
func TestL2_TwoRunCommandsOfOneSessionAtOnceOneProceeds(t *testing.T) {
	t.Parallel()
	for s := range 2 {
		t.Run(fmt.Sprintf("session%d", s+1), func(t *testing.T) {
			t.Parallel()
			twoRunCommands(t, 5)
		})
	}
}

// twoRunCommands plays rounds of TestL2_TwoRunCommandsOfOneSessionAtOnceOneProceeds
// on a session of its own.
func twoRunCommands(t *testing.T, rounds int) {
	l := counterLab(t, lifecycle.Settings{})
	rec := l.paused()
	bin := self(t)
	command := func(args ...string) (*exec.Cmd, *testsupport.Buffer) {
		cmd := exec.Command(bin, append(args, "--state-dir", l.stateDir())...)
		cmd.Dir = l.dir
		stderr := &testsupport.Buffer{}
		cmd.Stderr = stderr
		return cmd, stderr
	}
	for i := range rounds {
		var stdins [2]io.WriteCloser
		var stderrs [2]*testsupport.Buffer
		exited := make(chan int, 2)
		var errs [2]error
		for j := range stdins {
			cmd, stderr := command("run", "--session", rec.ID)
			stdins[j], _ = cmd.StdinPipe()
			stderrs[j] = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// run resumes the session once it has its first prompt.
			io.WriteString(stdins[j], "hello\n")
			go func() { errs[j] = cmd.Wait(); exited <- j }()
		}
		sweep, sweepErr := command("sessions", "sweep")
		if err := sweep.Run(); err != nil {
			t.Fatalf("round %d: sweep: %v\n%s", i, err, sweepErr)
		}
		loser := -1
		for loser < 0 {
			select {
			case loser = <-exited:
			case <-time.After(5 * time.Millisecond):
				// Each run names the run it started: both at once is the bug.
				started := "session " + rec.ID + " (run "
				if strings.Contains(stderrs[0].String(), started) && strings.Contains(stderrs[1].String(), started) {
					stdins[0].Close()
					stdins[1].Close()
					t.Fatalf("round %d: both runs proceeded:\n%s\n%s", i, stderrs[0], stderrs[1])
				}
			}
		}
		if errs[loser] == nil || !strings.Contains(stderrs[loser].String(), "session "+rec.ID+" is active") {
			t.Fatalf("round %d: the other run: %v\n%s", i, errs[loser], stderrs[loser])
		}
		stdins[1-loser].Close()
		if <-exited; errs[1-loser] != nil {
			t.Fatalf("round %d: the run: %v\n%s", i, errs[1-loser], stderrs[1-loser])
		}
		next, _ := l.engine.Store.Session(t.Context(), rec.ID)
		if next.State != lifecycle.Paused || next.Runs != rec.Runs+1 || next.Pause.Reason != "idle" {
			t.Fatalf("round %d: after the run: %+v (pause %+v)", i, next, next.Pause)
		}
		rec = next
	}
}

// TestC8_TeardownRetriedAfterAFailureSeesItsError: a teardown in a run of
// its own after a failure (a retry of a teardown that failed) gives the
// plugs the failure that ended the session in TeardownInfo.error.
func TestC8_TeardownRetriedAfterAFailureSeesItsError(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{IdlePolicy: lifecycle.PolicyEnd, TeardownBackoff: time.Millisecond}, map[string]string{
		"blaise.star": `setup(use("./outer.star"), use("./inner.star"))`,
		"outer.star": `plug(name = "outer")
def on_session(ctx, next):
    next()

def on_teardown(ctx, next):
    info = next()
    ctx.log.info("teardown %d: reason=%s error=%s" % (ctx.run.number, info.reason, info.error))
    if ctx.run.number == 1:
        fail("the first teardown fails")
`,
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    fail("cannot attach")
`,
	})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	rec := l.wait(live)
	if rec.State != lifecycle.TearingDown || rec.Teardown.Attempts != 1 {
		t.Fatalf("after run 1: %+v", rec)
	}
	for rec.State == lifecycle.TearingDown {
		if err := l.engine.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec, _ = l.engine.Store.Session(t.Context(), rec.ID)
	}
	logs := l.logs.String()
	want := "inner.star:3:9: plug inner: on_session: cannot attach"
	for _, run := range []string{"teardown 1: reason=failed error=", "teardown 2: reason=failed error="} {
		if !strings.Contains(logs, run+l.dir+"/"+want) {
			t.Fatalf("no %q…%q in the logs:\n%s", run, want, logs)
		}
	}
	if rec.State != lifecycle.Ended {
		t.Fatalf("record %+v", rec)
	}
}

// TestL3_AStopNoRunReceivesIsAnErrorAndChangesNothing: a stop sent to a run
// that has reported its pause (here a run that failed before any prompt)
// reaches no run: it is an error, and the record keeps no stale, undelivered
// stop.
func TestL3_AStopNoRunReceivesIsAnErrorAndChangesNothing(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{
		"blaise.star": `setup(use("./broken.star"))`,
		"broken.star": `plug(name = "broken")
def on_session(ctx, next):
    fail("cannot attach")
`,
	})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	// The pause is recorded before it is reported: the run takes no stop.
	for {
		rec, err := l.engine.Store.Session(t.Context(), live.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Pause != nil {
			break
		}
		select {
		case <-live.Done():
			t.Fatalf("the run ended without a pause: %+v", rec)
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); !errors.Is(err, engine.ErrNoRun) {
		t.Fatalf("stop after the pause: %v", err)
	}
	rec := l.wait(live)
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); !errors.Is(err, engine.ErrNoRun) {
		t.Fatalf("stop after the run: %v", err)
	}
	if rec, _ = l.engine.Store.Session(t.Context(), rec.ID); rec.Stop != nil || rec.State != lifecycle.Paused || rec.Pause.Reason != "failed" {
		t.Fatalf("record %+v stop %+v", rec, rec.Stop)
	}
}

// childPlug starts a child of a shell (a grandchild of the session
// process, in a group of its own), writes its pid to $DIR/child, and then
// waits for it, so that the handler is busy until cancelled.
const childPlug = `ctx.runner.exec(["sh", "-c", "sleep 600 & echo $! > $DIR/child; wait"])`

// spawnChildPlug is childPlug in the background: the handler goes on once
// the pid is written.
const spawnChildPlug = `ctx.runner.spawn(["sh", "-c", "sleep 600 & echo $! > $DIR/child; wait"])
    ctx.runner.exec(["sh", "-c", "until [ -s $DIR/child ]; do sleep 0.01; done"])`

// childGone reports whether the child that childPlug started has exited.
func (l *lab) childGone() bool {
	l.t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(l.file("child")))
	if err != nil {
		l.t.Fatalf("no child pid: %v", err)
	}
	return testsupport.Gone(pid)
}

// TestL5_AShortTimeoutKeepsTheStopGraceAndLeavesNothingRunning: a run
// timeout shorter than the stop grace. The handler still attaching has its
// stop grace, is then cancelled with its processes, and the outer plug's
// pause code runs: the run is not killed one timeout after the stop.
func TestL5_AShortTimeoutKeepsTheStopGraceAndLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{Timeout: 200 * time.Millisecond}, map[string]string{
		"blaise.star": `setup(use("./outer.star"), use("./slow.star"))`,
		"outer.star": `plug(name = "outer")
def on_session(ctx, next):
    info = next()
    ctx.runner.fs.write_file("$DIR/paused", "reason=%s" % info.reason)
`,
		"slow.star": `plug(name = "slow")
def on_session(ctx, next):
    ` + childPlug + `
    next()
`,
	})
	l.engine.TimeoutGrace = time.Minute
	l.engine.StopGrace = time.Second
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	rec := l.wait(live)
	if got := l.file("paused"); got != "reason=failed" {
		t.Fatalf("the outer pause code saw %q; record %+v pause %+v", got, rec, rec.Pause)
	}
	if rec.State != lifecycle.Ended || rec.Pause.Reason != "failed" || !strings.Contains(rec.Pause.Error, "plug slow: on_session") {
		t.Fatalf("record %+v pause %+v", rec, rec.Pause)
	}
	if !l.childGone() {
		t.Fatal("the handler's child outlived its run")
	}
}
