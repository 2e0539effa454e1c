package runstore

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// pair returns a client of a server over store, for session id, whose
// writes are refused once *failed is set.
func pair(t *testing.T, store lifecycle.RunStore, id string, failed *error) *Client {
	t.Helper()
	a, b := net.Pipe()
	srv := &Server{Store: store, Session: id, MayWrite: func(context.Context) error { return *failed }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), b) }()
	t.Cleanup(func() {
		a.Close()
		if err := <-done; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("serve: %v", err)
		}
	})
	return NewClient(a)
}

func newStore(t *testing.T) (*filestore.Store, string) {
	t.Helper()
	store, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewSessionID()
	now := time.Now()
	if err := store.CreateSession(t.Context(), &lifecycle.Record{ID: id, State: lifecycle.Active, Created: now, Updated: now, Runs: 1}); err != nil {
		t.Fatal(err)
	}
	return store, id
}

// TestL7_RunStoreOverAConnection: a run's reports, transcript and
// persisted state reach the store through the connection, and a set
// returns once the store has it (C11).
func TestL7_RunStoreOverAConnection(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	ctx := context.Background()
	if err := c.Loaded(ctx, id, lifecycle.Loaded{Resumable: true, OrphanedState: []string{"old"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Persisted().Set(ctx, id, "p1", "counter", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	// Committed: the store has it without the client.
	if data, ok, err := store.Persisted().Get(ctx, id, "p1"); err != nil || !ok || string(data) != `{"n":1}` {
		t.Fatalf("store has %q %v %v", data, ok, err)
	}
	if data, ok, err := c.Persisted().Get(ctx, id, "p1"); err != nil || !ok || string(data) != `{"n":1}` {
		t.Fatalf("get %q %v %v", data, ok, err)
	}
	if _, ok, err := c.Persisted().Get(ctx, id, "none"); err != nil || ok {
		t.Fatalf("get of nothing: %v %v", ok, err)
	}
	if name, ok, err := c.PersistedPlug(ctx, id, "p1"); err != nil || !ok || name != "counter" {
		t.Fatalf("plug %q %v %v", name, ok, err)
	}
	if ids, err := c.PersistedIDs(ctx, id); err != nil || len(ids) != 1 || ids[0] != "p1" {
		t.Fatalf("ids %v %v", ids, err)
	}
	w, _ := c.Transcript(ctx, id)
	if _, err := io.WriteString(w, "{\"a\":1}\n"); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Paused(ctx, id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1})
	if err != nil || rec.State != lifecycle.Paused || !rec.Resumable {
		t.Fatalf("paused: %+v %v", rec, err)
	}
	r, err := store.ReadTranscript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "{\"a\":1}\n" {
		t.Fatalf("transcript %q", got)
	}
}

// TestL3_FailedRunCannotWrite: once the control plane failed the run, its
// writes are refused and change nothing; reads still answer.
func TestL3_FailedRunCannotWrite(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	ctx := context.Background()
	failed = errors.New("run 1 of the session was failed: its runner is gone")
	if err := c.Persisted().Set(ctx, id, "p1", "counter", []byte("1")); err == nil || !strings.Contains(err.Error(), "was failed") {
		t.Fatalf("set from a failed run: %v", err)
	}
	if _, ok, _ := store.Persisted().Get(ctx, id, "p1"); ok {
		t.Fatal("a failed run's write landed")
	}
	if _, err := c.Session(ctx, id); err != nil {
		t.Fatalf("read: %v", err)
	}
}

// TestRunStoreRefusesOtherSessions: a run reaches its own session only.
func TestRunStoreRefusesOtherSessions(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	if _, err := c.Session(t.Context(), "othersession1"); err == nil || !strings.Contains(err.Error(), "this run is of session "+id) {
		t.Fatalf("other session: %v", err)
	}
	store2, _ := newStore(t)
	c2 := pair(t, store2, "missing00001", &failed)
	if _, err := c2.Session(t.Context(), "missing00001"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("missing session: %v, want ErrNotFound", err)
	}
}

// TestAForksStartRunReadsItsParentsPersistedStateOnly: the start run of
// a fork reads the persisted state of the session it was forked from
// (ctx.persisted.parent), and nothing else of it: not its record, not a
// write; another session stays out of reach.
func TestAForksStartRunReadsItsParentsPersistedStateOnly(t *testing.T) {
	store, fork := newStore(t)
	parent := store.NewSessionID()
	now := time.Now()
	if err := store.CreateSession(t.Context(), &lifecycle.Record{ID: parent, State: lifecycle.Paused, Created: now, Updated: now, Runs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := store.Persisted().Set(t.Context(), parent, "wt", "blaise/worktree", []byte(`{"path":"/w"}`)); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	srv := &Server{Store: store, Session: fork, Parent: parent}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), b) }()
	defer func() {
		a.Close()
		<-done
	}()
	c := NewClient(a)
	if data, ok, err := c.Persisted().Get(t.Context(), parent, "wt"); err != nil || !ok || string(data) != `{"path":"/w"}` {
		t.Fatalf("the parent's persisted state: %q %v %v", data, ok, err)
	}
	if err := c.Persisted().Set(t.Context(), parent, "wt", "blaise/worktree", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "this run is of session "+fork) {
		t.Fatalf("a write to the parent: %v", err)
	}
	if _, err := c.Session(t.Context(), parent); err == nil {
		t.Fatal("the fork's run read its parent's record")
	}
	if _, _, err := c.Persisted().Get(t.Context(), "othersession1", "wt"); err == nil {
		t.Fatal("the fork's run read another session's persisted state")
	}
	if data, _, _ := store.Persisted().Get(t.Context(), parent, "wt"); string(data) != `{"path":"/w"}` {
		t.Fatalf("the parent's persisted state changed: %q", data)
	}
}

// TestRunStoreBrokenConnection: a call on a connection that ended fails,
// and so does every later one.
func TestRunStoreBrokenConnection(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	c := NewClient(a)
	if _, err := c.Session(t.Context(), "x"); err == nil {
		t.Fatal("no error on a closed connection")
	}
	if err := c.Loaded(t.Context(), "x", lifecycle.Loaded{}); err == nil {
		t.Fatal("no error after the connection broke")
	}
}

// TestL7_DuplicateReportAppliedOnce: a report delivered twice (the same
// call again) is answered as before and applied once: a failed teardown
// counts one attempt, a transcript line is kept once.
func TestL7_DuplicateReportAppliedOnce(t *testing.T) {
	store, id := newStore(t)
	s := newRawStream(t, &Server{Store: store, Session: id})
	if _, err := store.UpdateSession(t.Context(), id, func(r *lifecycle.Record) error { r.State = lifecycle.TearingDown; return nil }); err != nil {
		t.Fatal(err)
	}
	torn := request{ID: 1, Op: OpTornDown, Session: id, Failure: "rm: busy", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	first := s.call(torn)
	if first.Error != "" || first.Record == nil {
		t.Fatalf("the teardown: %+v", first)
	}
	if again := s.call(torn); !reflect.DeepEqual(again, first) {
		t.Fatalf("the duplicate got another answer:\n%+v\n%+v", first, again)
	}
	appendLine := request{ID: 2, Op: OpAppend, Session: id, Data: []byte("{\"a\":1}\n")}
	for range 2 {
		if resp := s.call(appendLine); resp.Error != "" {
			t.Fatalf("the append: %+v", resp)
		}
	}
	rec, err := store.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Teardown.Attempts != 1 {
		t.Fatalf("teardown attempts %d, want 1", rec.Teardown.Attempts)
	}
	r, err := store.ReadTranscript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "{\"a\":1}\n" {
		t.Fatalf("transcript %q, want the line once", got)
	}
	// A call older than the last one is out of order: the connection ends.
	s.send(request{ID: 1, Op: OpSession, Session: id})
	testsupport.WantErr(t, within(t, s.done, "the stream's end"), "in order")
}

// gatedStore holds each transcript write until the test lets it go, and
// logs the writes and reports in the order the store applies them.
type gatedStore struct {
	lifecycle.RunStore
	entered chan struct{} // a transcript write began
	gate    chan struct{} // closed: writes go on
	log     chan string
	refuse  atomic.Bool
	// forward, when set, is the server's Forward: it tells the test of
	// each append the server read.
	forward io.Writer
}

// heldForward is a Forward that tells of each append the server read
// (read) and holds the server there until the test releases it. Serve
// forwards an append before it queues it for the committer: the append
// before the one held is queued, the one held is not yet.
type heldForward struct {
	read    chan string
	release chan struct{}
}

func newHeldForward() *heldForward {
	return &heldForward{read: make(chan string, 16), release: make(chan struct{})}
}

func (f *heldForward) Write(p []byte) (int, error) {
	f.read <- string(p)
	<-f.release
	return len(p), nil
}

// next waits until the server read an append and returns its lines; it
// holds the server, in that append's Forward, until pass.
func (f *heldForward) next(t *testing.T, what string) string {
	t.Helper()
	return within(t, f.read, "the server to read "+what)
}

// pass lets the server held go on.
func (f *heldForward) pass(t *testing.T) {
	t.Helper()
	hand(t, f.release, "the server to go on from its Forward")
}

func newGatedStore(t *testing.T) (*gatedStore, string) {
	store, id := newStore(t)
	return &gatedStore{RunStore: store, entered: make(chan struct{}, 16), gate: make(chan struct{}), log: make(chan string, 16)}, id
}

func (g *gatedStore) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	w, err := g.RunStore.Transcript(ctx, id)
	return gatedWriter{w, g}, err
}

func (g *gatedStore) Paused(ctx context.Context, id string, p lifecycle.PauseRecord) (*lifecycle.Record, error) {
	g.log <- "paused"
	return g.RunStore.Paused(ctx, id, p)
}

type gatedWriter struct {
	io.WriteCloser
	g *gatedStore
}

func (w gatedWriter) Write(p []byte) (int, error) {
	w.g.entered <- struct{}{}
	<-w.g.gate
	w.g.log <- "transcript " + string(p)
	return w.WriteCloser.Write(p)
}

// socketPair is a connection with the kernel's buffers between its ends,
// as a run's store has between the session process and its runner.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "store")
		if conns[i], err = net.FileConn(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return conns[0], conns[1]
}

// gatedPair serves store to a client over a socket pair; the run's writes
// are refused once store.refuse is set.
func gatedPair(t *testing.T, store *gatedStore, id string) *Client {
	t.Helper()
	c := served(t, &Server{Store: store, Session: id, Forward: store.forward, MayWrite: func(context.Context) error {
		if store.refuse.Load() {
			return errors.New("run 1 of the session was failed: its runner is gone")
		}
		return nil
	}})
	t.Cleanup(func() { close(store.gate) }) // before served's: the writes held go on
	return c
}

// served returns a client of srv over a socket, which srv serves until
// the test ends: the test fails if Serve fails, and a Serve that fails
// early closes its end, so that the client's calls fail instead of hanging.
func served(t *testing.T, srv *Server) *Client {
	t.Helper()
	a, b := socketPair(t)
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(context.Background(), b)
		b.Close()
	}()
	t.Cleanup(func() {
		a.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return NewClient(a)
}

// within waits for ch, failing the test after testsupport.Patience.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testsupport.Patience):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// hand sends on ch, failing the test after testsupport.Patience.
func hand(t *testing.T, ch chan<- struct{}, what string) {
	t.Helper()
	select {
	case ch <- struct{}{}:
	case <-time.After(testsupport.Patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// sent writes line to w and returns the write's error; it fails the test
// if the write waits for the store, which holds it.
func sent(t *testing.T, w io.Writer, line string) error {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(w, line)
		wrote <- err
	}()
	return within(t, wrote, "the write of "+line+" to return while the store holds the ones before")
}

// TestTranscriptWritesDoNotWaitForTheCommit: a run's transcript
// write returns once sent, while the server's commit is under way, so a
// turn does not wait for the server's disk; Close waits for every commit.
func TestTranscriptWritesDoNotWaitForTheCommit(t *testing.T) {
	store, id := newGatedStore(t)
	c := gatedPair(t, store, id)
	w, _ := c.Transcript(t.Context(), id)
	if err := sent(t, w, "{\"a\":1}\n"); err != nil {
		t.Fatal(err)
	}
	within(t, store.entered, "the store to get the write")
	go func() { store.gate <- struct{}{} }()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-store.log:
		if got != "transcript {\"a\":1}\n" {
			t.Fatalf("the store got %q", got)
		}
	default:
		t.Fatal("Close returned before the store had the lines")
	}
}

// TestL7_AppendsQueuedDuringACommitAreCommittedTogether: the appends
// that arrive while the server commits one are committed together, in
// one write; a report after them is applied once they are committed (L7);
// and the failure of an append reaches the transcript's next write. The
// test knows an append is queued for the committer once the server
// forwards the one after it (heldForward).
func TestL7_AppendsQueuedDuringACommitAreCommittedTogether(t *testing.T) {
	store, id := newGatedStore(t)
	forward := newHeldForward()
	store.forward = forward
	c := gatedPair(t, store, id)
	t.Cleanup(func() { close(forward.release) }) // before gatedPair's: a server held goes on and ends
	w, _ := c.Transcript(t.Context(), id)
	for _, line := range []string{"1", "2", "3", "4", "5"} {
		if err := sent(t, w, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if got := forward.next(t, "append "+line); got != line+"\n" {
			t.Fatalf("forwarded %q, want %q", got, line+"\n")
		}
		if line == "5" {
			break // held: 2 to 4 are queued, 5 is not
		}
		forward.pass(t)
		if line == "1" {
			within(t, store.entered, "the store to get the first write")
		}
	}
	paused := make(chan error, 1)
	go func() {
		_, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1})
		paused <- err
	}()
	var got []string
	for range 2 {
		hand(t, store.gate, "the store to take a write")
		got = append(got, within(t, store.log, "the store's writes"))
	}
	forward.pass(t)
	hand(t, store.gate, "the store to take the last write")
	for range 2 {
		got = append(got, within(t, store.log, "the last write and the report"))
	}
	if want := []string{"transcript 1\n", "transcript 2\n3\n4\n", "transcript 5\n", "paused"}; !slices.Equal(got, want) {
		t.Fatalf("the store applied %q, want %q", got, want)
	}
	if err := within(t, paused, "the pause's answer"); err != nil {
		t.Fatal(err)
	}
	store.refuse.Store(true)
	if err := sent(t, w, "6\n"); err != nil {
		t.Fatalf("a write is sent without waiting for its answer: %v", err)
	}
	forward.next(t, "append 6")
	forward.pass(t)
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "was failed") {
		t.Fatalf("close after a refused append: %v", err)
	}
}

// TestLargeAnswerWhileAppendingDoesNotDeadlock: a large answer
// (a persisted value of 512 KiB) comes while large appends are written:
// the client reads the answer while it writes, so neither side waits for
// the other without end.
func TestLargeAnswerWhileAppendingDoesNotDeadlock(t *testing.T) {
	store, id := newStore(t)
	a, b := socketPair(t)
	srv := &Server{Store: store, Session: id}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), b) }()
	c := NewClient(a)
	ctx := context.Background()
	value := []byte(`"` + strings.Repeat("v", 512<<10) + `"`)
	if err := c.Persisted().Set(ctx, id, "p1", "big", value); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Transcript(ctx, id)
	lines := []byte(strings.Repeat("x", 1<<20-1) + "\n")
	const rounds = 16
	appended := make(chan error, 1)
	go func() {
		for range rounds {
			if _, err := w.Write(lines); err != nil {
				appended <- err
				return
			}
		}
		appended <- w.Close()
	}()
	got := make(chan error, 1)
	go func() {
		for range rounds {
			data, ok, err := c.Persisted().Get(ctx, id, "p1")
			if err == nil && (!ok || len(data) != len(value)) {
				err = errors.New("the value came back changed")
			}
			if err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	if err := within(t, appended, "the appends (a deadlock of large calls and answers?)"); err != nil {
		t.Fatal(err)
	}
	if err := within(t, got, "the gets (a deadlock of large calls and answers?)"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := within(t, served, "the server to end"); err != nil {
		t.Fatal(err)
	}
}

// brokenTranscript is a store whose transcript writes fail.
type brokenTranscript struct{ lifecycle.RunStore }

func (s brokenTranscript) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	w, err := s.RunStore.Transcript(ctx, id)
	return failingWriter{w}, err
}

type failingWriter struct{ io.WriteCloser }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestReportAfterAFailedAppendIsRefused: once a transcript append
// failed, a pause report and a persisted write that follow it are refused
// and name the failure, so no report is applied as if the lines before it
// were committed (L7); Close returns the failure too.
func TestReportAfterAFailedAppendIsRefused(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, brokenTranscript{store}, id, &failed)
	w, _ := c.Transcript(t.Context(), id)
	if _, err := io.WriteString(w, "{\"a\":1}\n"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1})
	testsupport.WantErr(t, err, "disk full")
	rec, err := store.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.Active {
		t.Fatalf("the pause was applied after a lost line: state %s", rec.State)
	}
	testsupport.WantErr(t, c.Persisted().Set(context.Background(), id, "p1", "counter", []byte("1")), "disk full")
	testsupport.WantErr(t, w.Close(), "disk full")
}

// closeFailing is a store whose transcripts fail to close.
type closeFailing struct{ lifecycle.RunStore }

func (s closeFailing) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	w, err := s.RunStore.Transcript(ctx, id)
	return failingCloser{w}, err
}

type failingCloser struct{ io.WriteCloser }

func (failingCloser) Close() error { return errors.New("disk full") }

// TestATranscriptThatFailsToCloseIsReported: the run closes its
// store stream and the transcript, which holds a last line without its
// newline, fails to close: Serve says so (ErrTranscriptClose) instead of
// ending as if all was kept.
func TestATranscriptThatFailsToCloseIsReported(t *testing.T) {
	store, id := newStore(t)
	a, b := net.Pipe()
	srv := &Server{Store: closeFailing{store}, Session: id}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), b) }()
	c := NewClient(a)
	w, _ := c.Transcript(t.Context(), id)
	if _, err := io.WriteString(w, `{"a":1}`); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	err := within(t, done, "the server's end")
	if !errors.Is(err, ErrTranscriptClose) {
		t.Fatalf("serve: %v, want ErrTranscriptClose", err)
	}
	testsupport.WantErr(t, err, "disk full")
}

// TestTitledCrossesTheConnection: a run's title reaches the session's
// record through the connection.
func TestTitledCrossesTheConnection(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	if err := c.Titled(t.Context(), id, "fix the flaky test"); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.Session(t.Context(), id); err != nil {
		t.Fatal(err)
	} else if rec.Title != "fix the flaky test" {
		t.Fatalf("title %q", rec.Title)
	}
}

// TestUnknownOpOfAnOldServerIsDroppedAndTheRunGoesOn: an operation the
// server does not know (a newer runner's, such as titled to a server
// before it) fails alone; the calls after it are answered.
func TestUnknownOpOfAnOldServerIsDroppedAndTheRunGoesOn(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	if _, err := c.call(t.Context(), request{Op: "from_the_future", Session: id}); err == nil || !strings.Contains(err.Error(), "unknown operation") {
		t.Fatalf("unknown operation: %v", err)
	}
	if rec, err := c.Session(t.Context(), id); err != nil || rec.ID != id {
		t.Fatalf("the call after it: %+v %v", rec, err)
	}
}

// TestPlugLogCrossesTheConnection: a run's plug log lines reach the
// store through the connection.
func TestPlugLogCrossesTheConnection(t *testing.T) {
	store, id := newStore(t)
	var failed error
	c := pair(t, store, id, &failed)
	lines := []lifecycle.PlugLogLine{{Run: 1, Seq: 1, Level: "info", Plug: "acme/x", Msg: "hello", Attrs: []string{"k", "v"}}, {Run: 1, Seq: 2, Dropped: 3}}
	if err := c.AppendPlugLog(t.Context(), id, lines); err != nil {
		t.Fatal(err)
	}
	if got, err := store.PlugLog(t.Context(), id); err != nil || !reflect.DeepEqual(got, lines) {
		t.Fatalf("stored %+v (%v)", got, err)
	}
}
