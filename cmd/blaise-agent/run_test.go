package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// terminal is `blaise-agent run` started on pipes, as from a terminal.
type terminal struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	out    strings.Builder
	stderr testsupport.Buffer
	exited chan error
}

// startRun starts `run` of the lab's configuration with args.
func (l *lab) startRun(args ...string) *terminal {
	l.t.Helper()
	args = append([]string{"run", "-c", filepath.Join(l.dir, "blaise.star"), "--state-dir", l.stateDir()}, args...)
	term := &terminal{t: l.t, cmd: exec.Command(self(l.t), args...), lines: make(chan string, 100), exited: make(chan error, 1)}
	term.cmd.Dir = l.dir
	// A pipe of our own: the session process inherits run's stderr and may
	// outlive it, which Wait must not wait for.
	errR, errW, err := os.Pipe()
	if err != nil {
		l.t.Fatal(err)
	}
	term.cmd.Stderr = errW
	term.stdin, _ = term.cmd.StdinPipe()
	stdout, _ := term.cmd.StdoutPipe()
	err = term.cmd.Start()
	errW.Close()
	if err != nil {
		l.t.Fatal(err)
	}
	go func() { _, _ = io.Copy(&term.stderr, errR); errR.Close() }()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			term.lines <- sc.Text()
		}
		close(term.lines)
		term.exited <- term.cmd.Wait()
	}()
	l.t.Cleanup(func() { _ = term.cmd.Process.Kill() })
	return term
}

// stdout returns what run wrote to stdout so far.
func (term *terminal) stdout() string {
	for {
		select {
		case line, ok := <-term.lines:
			if !ok {
				return term.out.String()
			}
			term.out.WriteString(line + "\n")
		default:
			return term.out.String()
		}
	}
}

// waitFor waits until in() contains what.
func (term *terminal) waitFor(what string, in func() string) {
	term.t.Helper()
	if !testsupport.Wait(func() bool { return strings.Contains(in(), what) }) {
		term.t.Fatalf("no %q in:\n%s\nstderr:\n%s", what, in(), term.stderr.String())
	}
}

// waitForFile waits until the file at path exists.
func (term *terminal) waitForFile(path string) {
	term.t.Helper()
	term.waitFor(path, func() string {
		if _, err := os.Stat(path); err != nil {
			return ""
		}
		return path
	})
}

// signal interrupts run alone, as a terminal's Ctrl-C reaches the
// foreground group, of which the session process is not a member.
func (term *terminal) signal(sig os.Signal) { _ = term.cmd.Process.Signal(sig) }

// exit waits for run to exit and returns its status.
func (term *terminal) exit() int {
	term.t.Helper()
	term.stdout()
	select {
	case err := <-term.exited:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode()
		}
		if err != nil {
			term.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		term.t.Fatalf("run did not exit\nstdout:\n%s\nstderr:\n%s", term.out.String(), term.stderr.String())
		return -1
	}
}

// TestL9_CtrlCCancelsTheTurnThenLeavesPausing: Ctrl-C cancels the turn; a
// second one leaves and pauses the session, never ends it.
func TestL9_CtrlCCancelsTheTurnThenLeavesPausing(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	term := l.startRun()
	// A turn waiting for a permission answer is a turn in flight for sure:
	// the interrupts below cannot land between two turns.
	io.WriteString(term.stdin, "/chunks 1\n/permission\n")
	term.waitFor("chunk 1\npermission requested:", term.stdout)
	term.signal(os.Interrupt)
	term.waitFor("stopped: cancelled", term.stdout)
	term.waitFor("cancelling the turn (Ctrl-C again leaves; the session pauses)", term.stdout)
	// The next turns run as usual.
	io.WriteString(term.stdin, "/chunks 1\n/permission\n")
	term.waitFor("stopped: cancelled\nchunk 1\npermission requested:", term.stdout)
	// Cancelled, then Ctrl-C at the prompt: run leaves, the cancelled
	// turn answered as the person asked (a turn left unanswered exits 130:
	// TestL9_SIGTERMInATurnPausesAndExitsNonZero).
	term.signal(os.Interrupt)
	second := func() string { return strings.SplitN(term.stdout(), "stopped: cancelled", 2)[1] }
	term.waitFor("cancelling the turn", second)
	term.waitFor("stopped: cancelled", second)
	term.signal(os.Interrupt)
	if code := term.exit(); code != 0 {
		t.Fatalf("run exited with %d\n%s", code, term.stderr.String())
	}
	recs, _ := l.engine.Store.Sessions(t.Context())
	if len(recs) != 1 || recs[0].State != lifecycle.Paused || recs[0].Pause.Reason != "idle" || l.file("teardown") != "" {
		t.Fatalf("sessions %+v\n%s", recs, term.stderr.String())
	}
	term.waitFor("paused (idle); continue with", term.stderr.String)
}

// TestL9_SIGTERMInATurnPausesAndExitsNonZero: SIGTERM during the turn of
// a prompt given on the command line leaves at once; the session pauses,
// and run exits 130, since the prompt was not answered.
func TestL9_SIGTERMInATurnPausesAndExitsNonZero(t *testing.T) {
	t.Parallel()
	l := counterLab(t, lifecycle.Settings{})
	// The plan is shown, then the agent sleeps: a turn in flight for sure.
	term := l.startRun("/plan a; b\n/sleep 60000")
	term.waitFor("2. [ ] b", term.stdout)
	term.signal(syscall.SIGTERM)
	if code := term.exit(); code != 130 {
		t.Fatalf("run exited with %d\n%s", code, term.stderr.String())
	}
	recs, _ := l.engine.Store.Sessions(t.Context())
	if len(recs) != 1 || recs[0].State != lifecycle.Paused || recs[0].Pause.Reason != "idle" {
		t.Fatalf("sessions %+v\n%s", recs, term.stderr.String())
	}
	term.waitFor("paused (idle); continue with", term.stderr.String)
	term.waitFor("blaise-agent: left during a turn, before its answer", term.stderr.String)
}

// TestRunHonoursSignalsWhileAPlugAttaches: while a plug attaches (and the
// agent has not answered initialize), Ctrl-C and SIGTERM stop the run, and a
// second signal leaves at once; the session pauses on its own, with nothing
// left running.
func TestRunHonoursSignalsWhileAPlugAttaches(t *testing.T) {
	t.Parallel()
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, lifecycle.Settings{}, map[string]string{
				"blaise.star": `setup(use("./slow.star"))`,
				// It attaches until the test lets it go.
				"slow.star": `plug(name = "slow")
def on_session(ctx, next):
    ctx.runner.exec(["sh", "-c", "touch $DIR/attaching; while [ -d $DIR ] && [ ! -e $DIR/go ]; do sleep 0.01; done"])
    next()
`,
			})
			term := l.startRun("hello")
			term.waitForFile(filepath.Join(l.dir, "attaching"))
			term.signal(sig)
			term.waitFor("stopping the run (Ctrl-C again leaves at once)", term.stderr.String)
			term.signal(sig)
			if code := term.exit(); code != 130 {
				t.Fatalf("run exited with %d\n%s", code, term.stderr.String())
			}
			// run wrote it before it exited, but its stderr is read
			// apart from its exit: waited for.
			term.waitFor("settles on its own", term.stderr.String)
			// Let the plug go: the stopped run pauses without its front end.
			if err := os.WriteFile(filepath.Join(l.dir, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var recs []*lifecycle.Record
			if !testsupport.Wait(func() bool {
				recs, _ = l.engine.Store.Sessions(t.Context())
				return len(recs) == 1 && recs[0].State == lifecycle.Paused && recs[0].Pause.Reason == "idle"
			}) {
				t.Fatalf("sessions %+v\n%s", recs, term.stderr.String())
			}
		})
	}
}

// TestRunHonoursSignalsWhileItSettlesEarlierSessions: the sweep run does at
// its start (here the teardown of an expired session, whose plug takes its
// time) does not make it deaf to Ctrl-C.
func TestRunHonoursSignalsWhileItSettlesEarlierSessions(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{PausedLifetime: time.Millisecond}, map[string]string{
		"blaise.star": `setup(use("./slow.star"))`,
		"slow.star": `plug(name = "slow")
def on_session(ctx, next):
    next()
def on_teardown(ctx, next):
    ctx.runner.exec(["sh", "-c", "touch $DIR/tearing; while [ -d $DIR ] && [ ! -e $DIR/go ]; do sleep 0.01; done"])
    next()
`,
	})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	_ = live.StopIdle()
	l.wait(live)
	term := l.startRun("hello")
	term.waitForFile(filepath.Join(l.dir, "tearing"))
	term.signal(os.Interrupt)
	if code := term.exit(); code != 130 {
		t.Fatalf("run exited with %d\n%s", code, term.stderr.String())
	}
	// Let the plug go: the teardown ends without the front end.
	if err := os.WriteFile(filepath.Join(l.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var rec *lifecycle.Record
	if !testsupport.Wait(func() bool {
		rec, _ = l.engine.Store.Session(t.Context(), live.ID)
		return rec != nil && rec.State == lifecycle.Ended
	}) {
		t.Fatalf("session %+v\n%s", rec, term.stderr.String())
	}
}
