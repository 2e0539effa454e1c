package engine_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// runInProgress returns a file store on a fake clock with a session whose
// first run is in progress, as a server that restarted finds it; change,
// when not nil, changes the record before it is stored.
func runInProgress(t *testing.T, change func(*lifecycle.Record)) (*filestore.Store, *lifecycle.FakeClock, *lifecycle.Record) {
	t.Helper()
	store, err := filestore.OpenStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	clock := lifecycle.NewFakeClock(time.Now())
	store.Clock = clock
	now := clock.Now()
	rec := &lifecycle.Record{ID: store.NewSessionID(), Config: "/blaise.star", State: lifecycle.Active, Created: now, Updated: now, Settings: lifecycle.DefaultSettings(), Resumable: true}
	lifecycle.BeginRun(rec, lifecycle.StartRun, now)
	if change != nil {
		change(rec)
	}
	if err := store.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return store, clock, rec
}

// TestARunInProgressIsLeftForItsRunnerUntilAdoptUntil: a session
// whose run began before the engine did (a server that restarted) is left
// active while its runner may still hand the run back: no sweep settles
// it, and a resume or an end of it is refused as active. Once AdoptUntil
// has passed, the sweep settles it as a failed run.
func TestARunInProgressIsLeftForItsRunnerUntilAdoptUntil(t *testing.T) {
	store, clock, rec := runInProgress(t, nil)
	now := clock.Now()
	e := &engine.Engine{Store: store, Clock: clock, AdoptUntil: now.Add(time.Minute)}
	if err := e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(t.Context(), rec.ID); err == nil || !strings.Contains(err.Error(), "may still hand it back") {
		t.Fatalf("resume while the run may be handed back: %v", err)
	}
	if _, err := e.End(context.Background(), rec.ID); err == nil || !strings.Contains(err.Error(), "may still hand it back") {
		t.Fatalf("end while the run may be handed back: %v", err)
	}
	if err := e.Adoptable(t.Context(), rec.ID, 1); err != nil {
		t.Fatalf("adoptable: %v", err)
	}
	if got, _ := store.Session(t.Context(), rec.ID); got.State != lifecycle.Active || !got.Updated.Equal(now) {
		t.Fatalf("before AdoptUntil: %+v", got)
	}
	clock.Advance(time.Minute)
	if err := e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Session(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.Paused || got.Pause == nil || got.Pause.Reason != lifecycle.Failed {
		t.Fatalf("after AdoptUntil: %+v", got)
	}
	if err := e.Adoptable(t.Context(), rec.ID, 1); err == nil || !strings.Contains(err.Error(), "is paused") {
		t.Fatalf("adoptable once settled: %v", err)
	}
}

// pipeProcess is a session process's end of real pipes, whose other end
// the test holds: what a runner hands back after a restart.
type pipeProcess struct {
	stdin, stdout, ctlIn, ctlOut *os.File // the engine's ends
	peerStdout, peerCtlIn        *os.File // the test's write ends
	peerCtl                      *engine.ControlConn
	signals                      chan bool
	exited                       chan struct{}
	stdinClosed                  chan struct{} // the engine closed its end of stdin
	lines                        chan string   // what reached stdin, a line each (the first 64)
}

func newPipeProcess(t *testing.T) *pipeProcess {
	t.Helper()
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		return r, w
	}
	p := &pipeProcess{signals: make(chan bool, 4), exited: make(chan struct{}), stdinClosed: make(chan struct{}), lines: make(chan string, 64)}
	stdinR, stdin := pipe()
	go func() {
		lines := bufio.NewScanner(stdinR)
		for lines.Scan() {
			select {
			case p.lines <- lines.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdinR)
		close(p.stdinClosed)
	}()
	p.stdin = stdin
	p.stdout, p.peerStdout = pipe()
	p.ctlIn, p.peerCtlIn = pipe()
	peerCtlOut, ctlOut := pipe()
	p.ctlOut = ctlOut
	p.peerCtl = engine.NewControlConn(peerCtlOut, p.peerCtlIn)
	return p
}

// end ends the process: its output, then its exit.
func (p *pipeProcess) end() {
	p.peerStdout.Close()
	p.peerCtlIn.Close()
	close(p.exited)
}

func (p *pipeProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *pipeProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *pipeProcess) Control() io.ReadWriteCloser {
	return struct {
		io.Reader
		io.Writer
		io.Closer
	}{p.ctlIn, p.ctlOut, p.ctlOut}
}
func (p *pipeProcess) Wait() error      { <-p.exited; return nil }
func (p *pipeProcess) Signal(kill bool) { p.signals <- kill }
func (p *pipeProcess) PID() int         { return 0 }

// TestL5_AStopSentAgainAfterARestartHasItsGraceFromNow: a timeout stop
// recorded before the restart and never sent, older than its grace, is sent
// to the adopted run, and the run has its whole grace from then (L5)
// before it is failed: it is not killed at once for a stop it never received.
func TestL5_AStopSentAgainAfterARestartHasItsGraceFromNow(t *testing.T) {
	const grace = time.Minute
	store, clock, rec := runInProgress(t, func(rec *lifecycle.Record) {
		rec.Stop = &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: lifecycle.Timeout}, At: rec.Created.Add(-2 * grace), Run: 1}
	})
	now := clock.Now()
	e := &engine.Engine{Store: store, Clock: clock, TimeoutGrace: grace, AdoptUntil: now.Add(grace)}
	proc := newPipeProcess(t)
	if _, err := e.Adopt(t.Context(), rec.ID, 1, proc); err != nil {
		t.Fatal(err)
	}
	if m, err := proc.peerCtl.Receive(); err != nil || m.Kind != lifecycle.ControlStop || m.Stop == nil || m.Stop.Reason != lifecycle.Timeout {
		t.Fatalf("the adopted run got %+v %v, want its timeout stop", m, err)
	}
	<-clock.Waiting() // the run's timers wait
	select {
	case kill := <-proc.signals:
		t.Fatalf("the run was signalled (kill %v) as soon as it was adopted, within the grace of its stop", kill)
	default:
	}
	if got, err := store.Session(t.Context(), rec.ID); err != nil || got.Stop == nil || !got.Stop.At.Equal(now) || !got.Stop.Delivered {
		t.Fatalf("the stop sent again is recorded as %+v %v, want delivered at %v", got.Stop, err, now)
	}
	clock.Advance(grace)
	if kill := <-proc.signals; kill {
		t.Fatal("a run that ignored its stop got SIGKILL first, want SIGTERM")
	}
	// SIGTERM: the run reports its pause and ends.
	if err := proc.peerCtl.Send(lifecycle.Control{Kind: lifecycle.ControlPause, Run: 1, Pause: &lifecycle.PauseRecord{Reason: lifecycle.Timeout, At: clock.Now(), Run: 1}}); err != nil {
		t.Fatal(err)
	}
	proc.end()
	testsupport.Eventually(t, "the run ends", func() bool { return e.Running(rec.ID) == nil })
}

// TestARunTakenBackDoesNotWaitForAFrontEnd: the messages of a run
// adopted that no front end has claimed are read, not held: its output
// does not fill and stop it (a runner's store, which forwards the
// messages of a run before it answers its calls, would answer nothing
// until a client came back). A front end that claims it gets the messages
// from then on.
func TestARunTakenBackDoesNotWaitForAFrontEnd(t *testing.T) {
	store, clock, rec := runInProgress(t, nil)
	e := &engine.Engine{Store: store, Clock: clock, AdoptUntil: clock.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	if _, err := e.Adopt(t.Context(), rec.ID, 1, proc); err != nil {
		t.Fatal(err)
	}
	// Far more than the engine holds of messages no one reads.
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"` + strings.Repeat("x", 200) + `"}}}` + "\n"
	written := make(chan error, 1)
	go func() {
		_, err := proc.peerStdout.WriteString(strings.Repeat(update, 20000))
		written <- err
	}()
	var err error
	if !testsupport.Wait(func() bool {
		select {
		case err = <-written:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("the output of a run adopted and not claimed stopped: the engine holds its messages for no one")
	}
	if err != nil {
		t.Fatal(err)
	}
	live := e.Claim(rec.ID)
	if live == nil {
		t.Fatal("no run to claim")
	}
	if _, err := proc.peerStdout.WriteString(`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	for m := range live.Messages() {
		if string(m.ID) == "7" {
			break
		}
	}
	proc.end()
	testsupport.Eventually(t, "the run ends", func() bool { return e.Running(rec.ID) == nil })
}

// TestAForksFirstRunIsNotAdoptedAndTheForkFails: the first run of a fork,
// in progress as a server that restarted finds it, is not adopted: only
// the Fork that began it could finish the fork. Once AdoptUntil has
// passed, it is settled as a failed fork that is over, waiting for its
// teardown, never paused as if it were made.
func TestAForksFirstRunIsNotAdoptedAndTheForkFails(t *testing.T) {
	store, clock, rec := runInProgress(t, func(r *lifecycle.Record) { r.ForkedFrom = "parent" })
	e := &engine.Engine{Store: store, Clock: clock, AdoptUntil: clock.Now().Add(time.Minute)}
	if err := e.Adoptable(t.Context(), rec.ID, 1); err == nil || !strings.Contains(err.Error(), "the first run of a fork of session parent") {
		t.Fatalf("adoptable: %v", err)
	}
	clock.Advance(time.Minute)
	if _, err := e.Resume(t.Context(), rec.ID); err == nil || !strings.Contains(err.Error(), "tearing_down") {
		t.Fatalf("resume of a fork that was not made: %v", err)
	}
	got, err := store.Session(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.TearingDown || got.EndReason != lifecycle.Failed || got.Pause == nil || got.Pause.Reason != lifecycle.Failed ||
		!strings.Contains(got.Pause.Error, "the fork of session parent was not made") {
		t.Fatalf("after AdoptUntil: %s, end reason %s, pause %+v", got.State, got.EndReason, got.Pause)
	}
}
