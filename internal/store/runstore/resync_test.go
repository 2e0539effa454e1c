package runstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// testRunner stands between a client and its run's store streams as a
// runner does (listen), with the runner's Relay: it passes on whole
// frames, and on each new stream tells the client, dropping what the
// client sends before its OpResync. Answers of a stream it is told to lose
// are dropped, as a connection that broke before they came would.
type testRunner struct {
	t     *testing.T
	local net.Conn // the runner's end of the client's connection
	relay Relay

	mu  sync.Mutex
	cur net.Conn // the runner's end of the store stream in use
}

// newTestRunner returns a client whose calls go through a testRunner.
func newTestRunner(t *testing.T) (*testRunner, *Client) {
	a, b := socketPair(t)
	r := &testRunner{t: t, local: b}
	go r.pump()
	t.Cleanup(func() { a.Close(); b.Close() })
	return r, NewClient(a)
}

func (r *testRunner) pump() {
	fr := NewFrameReader(r.local)
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		r.mu.Lock()
		st := r.cur
		pass := st != nil && r.relay.Pass(f)
		r.mu.Unlock()
		if pass {
			st.Write(f.Bytes) // a write to a broken stream is lost
		}
	}
}

// attach serves a new store stream of the run with srv: the first, or one
// after a reconnection. loseAnswers drops what srv answers on it (and the
// notice of it, if it is not the first), as a stream whose connection
// broke before any of it reached the runner.
func (r *testRunner) attach(srv *Server, loseAnswers bool) (serve <-chan error) {
	mine, theirs := net.Pipe()
	r.t.Cleanup(func() { mine.Close() }) // ends the stream's server and its relay
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), theirs) }()
	var w io.Writer = r.local
	if loseAnswers {
		w = io.Discard
	}
	r.mu.Lock()
	r.cur = mine
	r.relay.Attach(w, mine, nil)
	r.mu.Unlock()
	return done
}

// cut breaks the store stream in use.
func (r *testRunner) cut() {
	r.mu.Lock()
	st := r.cur
	r.cur = nil
	r.mu.Unlock()
	st.Close()
}

// cutWhileHeld breaks the stream whose Serve is first while a store holds
// an append until gate is closed, then lets the append be committed, its
// answer lost with the stream, and waits for the stream's end.
func (r *testRunner) cutWhileHeld(gate chan struct{}, first <-chan error) {
	r.t.Helper()
	r.cut()
	close(gate)
	within(r.t, first, "the broken stream's end")
}

// records are n bytes or more of transcript lines.
func records(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"seq":%d,"message":{"text":"%s"}}`+"\n", i, strings.Repeat("x", 200))
	}
	return b.String()
}

func openSQLite(t *testing.T, path string, key []byte) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), path, key, filepath.Join(filepath.Dir(path), "transcripts"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestCallsInFlightSurviveABrokenStream: appends and a persisted
// write in flight when the run's store stream breaks are sent again on
// the next stream, in order; the server, which applied some of them
// already, answers those as before and applies each call once.
func TestCallsInFlightSurviveABrokenStream(t *testing.T) {
	store, id := newGatedStore(t)
	srv := &Server{Store: store, Session: id, Run: 1}
	r, c := newTestRunner(t)
	first := r.attach(srv, false)
	w, _ := c.Transcript(t.Context(), id)
	if err := sent(t, w, "{\"a\":1}\n"); err != nil {
		t.Fatal(err)
	}
	within(t, store.entered, "the first append's commit")
	// Sent while the store holds the first: read by the server or not.
	for _, line := range []string{"{\"b\":2}\n", "{\"c\":3}\n"} {
		if err := sent(t, w, line); err != nil {
			t.Fatal(err)
		}
	}
	set := make(chan error, 1)
	go func() { set <- c.Persisted().Set(context.Background(), id, "p", "acme/p", []byte(`{"v":1}`)) }()
	// The stream breaks: the first append is committed once the store
	// lets it go, and its answer is lost with the stream.
	r.cutWhileHeld(store.gate, first)
	r.attach(srv, false)
	if err := within(t, set, "the persisted write's answer on the new stream"); err != nil {
		t.Fatalf("set: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	if got, want := storetest.ReadTranscript(t, store.RunStore.(*filestore.Store), id), "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"; got != want {
		t.Fatalf("transcript %q, want %q: each line once", got, want)
	}
	if v, ok, err := store.Persisted().Get(context.Background(), id, "p"); err != nil || !ok || string(v) != `{"v":1}` {
		t.Fatalf("persisted: %q %v %v", v, ok, err)
	}
	// The run goes on on the new stream.
	if rec, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1}); err != nil || rec.State != lifecycle.Paused {
		t.Fatalf("pause after the reconnection: %v %+v", err, rec)
	}
}

// TestAppendSentAgainAfterARestartIsCommittedOnce: a server that
// restarted does not know which calls of the run the one before applied.
// The appends it committed are told by the transcript's last call, and
// the teardown it recorded by the run's history: sent again, they are
// answered and not applied twice; the calls it never got are applied.
func TestAppendSentAgainAfterARestartIsCommittedOnce(t *testing.T) {
	path, key := filepath.Join(t.TempDir(), "blaise.db"), make([]byte, 32)
	rand.Read(key)
	before := openSQLite(t, path, key)
	id := before.NewSessionID()
	rec := &lifecycle.Record{ID: id, AgentName: "a", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}
	lifecycle.BeginRun(rec, lifecycle.TeardownRun, time.Now())
	rec.State = lifecycle.TearingDown
	if err := before.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	r, c := newTestRunner(t)
	// The first server applies every call, and its answers are lost.
	r.attach(&Server{Store: before, Session: id, Run: 1}, true)
	w, _ := c.Transcript(t.Context(), id)
	bulk := records(2000)
	for _, line := range []string{"{\"a\":1}\n", bulk, "{\"b\":2}\n"} {
		if err := sent(t, w, line); err != nil {
			t.Fatal(err)
		}
	}
	torn := make(chan error, 1)
	go func() {
		_, err := c.TornDown(t.Context(), id, errors.New("rm: busy"), time.Now())
		torn <- err
	}()
	testsupport.Eventually(t, "the first server records the teardown", func() bool {
		rec, err := before.Session(t.Context(), id)
		return err == nil && rec.Teardown.Attempts == 1
	})
	want := "{\"a\":1}\n" + bulk + "{\"b\":2}\n"
	if got := storetest.ReadTranscript(t, before, id); got != want {
		t.Fatalf("the first server's transcript: %d bytes, want %d", len(got), len(want))
	}
	// The server restarts: a new one, on the same database.
	r.cut()
	before.Close()
	after := openSQLite(t, path, key)
	r.attach(&Server{Store: after, Session: id, Run: 1}, false)
	if err := within(t, torn, "the teardown's answer from the new server"); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	// A call the first server never got is applied.
	if err := sent(t, w, "{\"c\":3}\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	if got := storetest.ReadTranscript(t, after, id); got != want+"{\"c\":3}\n" {
		t.Fatalf("transcript after the restart: %d bytes, want %d: each line once", len(got), len(want)+8)
	}
	rec, err := after.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Teardown.Attempts != 1 {
		t.Fatalf("teardown attempts %d, want 1: the teardown sent again was applied again", rec.Teardown.Attempts)
	}
}

// TestCallSentAgainWithOtherContentIsRefused: a call sent again
// under a number the server applied, but asking for something else, is
// refused with an error that says so; what was applied stays.
func TestCallSentAgainWithOtherContentIsRefused(t *testing.T) {
	store, id := newStore(t)
	s := newRawStream(t, &Server{Store: store, Session: id, Run: 1})
	if resp := s.call(request{ID: 1, Op: OpAppend, Session: id, Data: []byte("{\"a\":1}\n")}); resp.ID != 1 || resp.Error != "" || resp.NotFound {
		t.Fatalf("the append: %+v", resp)
	}
	s.send(request{Op: OpResync, Resync: 2})
	resp := s.call(request{ID: 1, Op: OpAppend, Session: id, Data: []byte("{\"b\":2}\n")})
	if want := fmt.Sprintf("call 1 (%s, 8 bytes) sent again is not the call 1 applied: refused", OpAppend); !strings.Contains(resp.Error, want) {
		t.Fatalf("a call sent again with other lines was answered %+v, want %q", resp, want)
	}
	if got := storetest.ReadTranscript(t, store, id); got != "{\"a\":1}\n" {
		t.Fatalf("transcript %q, want the first append's line only", got)
	}
}

// holdingStore holds the first transcript write until gate is closed.
type holdingStore struct {
	lifecycle.RunStore
	entered chan struct{} // the first transcript write began
	gate    chan struct{}
	once    sync.Once
}

func (h *holdingStore) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	w, err := h.RunStore.Transcript(ctx, id)
	return holdingWriter{w, h}, err
}

type holdingWriter struct {
	io.WriteCloser
	h *holdingStore
}

func (w holdingWriter) Write(p []byte) (int, error) {
	w.h.once.Do(func() {
		close(w.h.entered)
		<-w.h.gate
	})
	return w.WriteCloser.Write(p)
}

// blocked reports whether a transcript write of c waits for the answer of
// an append (maxUnanswered).
func blocked(c *Client) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocked > 0
}

// TestAppendsPastTheBoundSurviveABrokenStream: the stream breaks
// while maxUnanswered appends are unanswered and the next transcript
// write waits for a free slot. The appends are sent again on the next
// stream, the write goes on, and each line is committed once.
func TestAppendsPastTheBoundSurviveABrokenStream(t *testing.T) {
	base, id := newStore(t)
	store := &holdingStore{RunStore: base, entered: make(chan struct{}), gate: make(chan struct{})}
	srv := &Server{Store: store, Session: id, Run: 1}
	r, c := newTestRunner(t)
	first := r.attach(srv, false)
	w, _ := c.Transcript(t.Context(), id)
	line := func(i int) string { return fmt.Sprintf("{\"n\":%d}\n", i) }
	var want strings.Builder
	for i := range maxUnanswered {
		if err := sent(t, w, line(i)); err != nil {
			t.Fatal(err)
		}
		want.WriteString(line(i))
		if i == 0 {
			within(t, store.entered, "the first append's commit")
		}
	}
	// maxUnanswered appends are unanswered: the next write waits.
	wrote := make(chan error, 1)
	go func() {
		for i := maxUnanswered; i < 2*maxUnanswered+2; i++ {
			if _, err := io.WriteString(w, line(i)); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	for i := maxUnanswered; i < 2*maxUnanswered+2; i++ {
		want.WriteString(line(i))
	}
	testsupport.Eventually(t, "a transcript write waiting for an append's answer", func() bool { return blocked(c) })
	r.cutWhileHeld(store.gate, first)
	r.attach(srv, false)
	if err := within(t, wrote, "the writes past the bound, on the new stream"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	if got := storetest.ReadTranscript(t, base, id); got != want.String() {
		t.Fatalf("transcript %q,\nwant %q: each line once", got, want.String())
	}
	if rec, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1}); err != nil || rec.State != lifecycle.Paused {
		t.Fatalf("pause after the reconnection: %v %+v", err, rec)
	}
}

// rawStream is a store stream served by a Server, written to and read
// from call by call, as a run's client would but with the calls the test
// makes.
type rawStream struct {
	t    *testing.T
	conn net.Conn
	w    *bufio.Writer
	r    *bufio.Reader
	done chan error // Serve's end
}

func newRawStream(t *testing.T, srv *Server) *rawStream {
	t.Helper()
	a, b := net.Pipe()
	s := &rawStream{t: t, conn: a, w: bufio.NewWriter(a), r: bufio.NewReader(a), done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(context.Background(), b) }()
	t.Cleanup(func() { a.Close() })
	return s
}

// send sends req, and its data.
func (s *rawStream) send(req request) {
	s.t.Helper()
	req.Size = len(req.Data)
	err := writeFrame(s.w, req, req.Data)
	if err == nil {
		err = s.w.Flush()
	}
	if err != nil {
		s.t.Fatal(err)
	}
}

// call sends req and returns its answer.
func (s *rawStream) call(req request) response {
	s.t.Helper()
	s.send(req)
	var resp response
	data, err := readData(s.r, &resp, func() int { return resp.Size })
	if err != nil {
		s.t.Fatalf("no answer to call %d (%s): %v", req.ID, req.Op, err)
	}
	resp.Data = data
	return resp
}

// TestAReadIsKeptWithoutItsData: the server keeps the answer of a
// persisted read until the run says it read it, but not the value, which
// may be 64 MiB: a read sent again is read again.
func TestAReadIsKeptWithoutItsData(t *testing.T) {
	store, id := newStore(t)
	ctx := context.Background()
	if err := store.Persisted().Set(ctx, id, "p", "acme/p", []byte(`"first"`)); err != nil {
		t.Fatal(err)
	}
	srv := &Server{Store: store, Session: id, Run: 1}
	s := newRawStream(t, srv)
	get := request{ID: 1, Op: OpGet, Session: id, PlugID: "p"}
	if resp := s.call(get); !resp.OK || string(resp.Data) != `"first"` {
		t.Fatalf("the read: %+v %q", resp, resp.Data)
	}
	for _, k := range srv.kept {
		if k.resp.Data != nil || k.resp.Record != nil {
			t.Fatalf("the answer of call %d is kept with its data", k.id)
		}
	}
	if err := store.Persisted().Set(ctx, id, "p", "acme/p", []byte(`"second"`)); err != nil {
		t.Fatal(err)
	}
	s.send(request{Op: OpResync, Resync: 2, Sent: 1})
	if resp := s.call(get); !resp.OK || string(resp.Data) != `"second"` {
		t.Fatalf("the read sent again: %+v %q, want it read again", resp, resp.Data)
	}
}

// TestAnswersNeverSaidReadAreBounded: a run that never says which
// answers it read gets an error once maxKept are kept, not a server that
// keeps them without end.
func TestAnswersNeverSaidReadAreBounded(t *testing.T) {
	store, id := newStore(t)
	srv := &Server{Store: store, Session: id, Run: 1}
	s := newRawStream(t, srv)
	for n := uint64(1); n <= maxKept; n++ {
		if resp := s.call(request{ID: n, Op: OpPlug, Session: id, PlugID: "p"}); resp.ID != n || resp.Error != "" {
			t.Fatalf("call %d: %+v", n, resp)
		}
	}
	s.send(request{ID: maxKept + 1, Op: OpPlug, Session: id, PlugID: "p"})
	testsupport.WantErr(t, within(t, s.done, "the stream's end"), "not read", "at most 1024")
	if len(srv.kept) > maxKept {
		t.Fatalf("%d answers kept", len(srv.kept))
	}
}

// TestAStoreStreamTellsBrokenCallsFromACut: a Serve that ends on
// calls that break the protocol says so (ErrBroken), and the server fails
// the run; one whose stream was cut in the middle of a call does not, and
// the run sends the call again on its next stream.
func TestAStoreStreamTellsBrokenCallsFromACut(t *testing.T) {
	call := func(id uint64, size int) string {
		line, err := json.Marshal(request{ID: id, Op: OpSet, Session: "s", PlugID: "p", Size: size})
		if err != nil {
			t.Fatal(err)
		}
		return string(line) + "\n"
	}
	for _, c := range []struct {
		name, sent string
		broken     bool
	}{
		{"a call after calls that never came", call(5, 0), true},
		{"a bad line", "not json\n", true},
		{"a line too long", strings.Repeat("x", 70<<10) + "\n", true},
		{"a call cut in its data", call(1, 10) + "abc", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, srv := net.Pipe()
			t.Cleanup(func() { srv.Close() })
			go func() {
				io.WriteString(run, c.sent)
				run.Close()
			}()
			err := (&Server{Session: "s", Run: 1}).Serve(context.Background(), srv)
			if err == nil || errors.Is(err, ErrBroken) != c.broken {
				t.Fatalf("Serve: %v; want an error that is ErrBroken: %v", err, c.broken)
			}
		})
	}
}

// TestPlugLogAndTitleSentAgainAfterARestartAreKeptOnce: plug log lines
// and a title a server that restarted applied, sent again, are answered
// by the new one and kept once.
func TestPlugLogAndTitleSentAgainAfterARestartAreKeptOnce(t *testing.T) {
	path, key := filepath.Join(t.TempDir(), "blaise.db"), make([]byte, 32)
	rand.Read(key)
	before := openSQLite(t, path, key)
	id := before.NewSessionID()
	rec := &lifecycle.Record{ID: id, AgentName: "a", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}
	lifecycle.BeginRun(rec, lifecycle.StartRun, time.Now())
	if err := before.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	r, c := newTestRunner(t)
	// The first server applies every call, and its answers are lost.
	r.attach(&Server{Store: before, Session: id, Run: 1}, true)
	lines := []lifecycle.PlugLogLine{{Run: 1, Seq: 1, Level: "info", Plug: "acme/x", Msg: "one"}, {Run: 1, Seq: 2, Level: "info", Plug: "acme/x", Msg: "two"}}
	logged, titled := make(chan error, 1), make(chan error, 1)
	go func() { logged <- c.AppendPlugLog(t.Context(), id, lines) }()
	go func() { titled <- c.Titled(t.Context(), id, "fix the flaky test") }()
	testsupport.Eventually(t, "the first server stores the lines and the title", func() bool {
		got, _ := before.PlugLog(t.Context(), id)
		rec, _ := before.Session(t.Context(), id)
		return len(got) == 2 && rec != nil && rec.Title != ""
	})
	// The server restarts: a new one, on the same database.
	r.cut()
	before.Close()
	after := openSQLite(t, path, key)
	r.attach(&Server{Store: after, Session: id, Run: 1}, false)
	if err := within(t, logged, "the plug log's answer from the new server"); err != nil {
		t.Fatalf("plug log: %v", err)
	}
	if err := within(t, titled, "the title's answer from the new server"); err != nil {
		t.Fatalf("title: %v", err)
	}
	if got, err := after.PlugLog(t.Context(), id); err != nil || len(got) != 2 || got[1].Msg != "two" {
		t.Fatalf("plug log after the restart: %+v %v; want each line once", got, err)
	}
	if rec, err := after.Session(t.Context(), id); err != nil {
		t.Fatal(err)
	} else if rec.Title != "fix the flaky test" {
		t.Fatalf("title after the restart: %q", rec.Title)
	}
}
