package runstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// record is a record line as an acp.Carrier writes it, of a notification
// whose text is text.
func record(seq int, direction, text string) string {
	return fmt.Sprintf(`{"seq":%d,"time":"2026-12-02T10:00:00Z","direction":"%s","kind":"notification","method":"session/update","message":%s}`+"\n", seq, direction, message(text))
}

func message(text string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","text":"` + text + `"}}`
}

// forwarded is what a Server forwards, and the messages a carried reader
// takes out of it, as the engine does.
type forwarded struct {
	w    *io.PipeWriter
	msgs chan string
}

func newForwarded(t *testing.T) *forwarded {
	r, w := io.Pipe()
	f := &forwarded{w: w, msgs: make(chan string, 64)}
	go func() {
		rd := acp.NewCarriedReader(r, acp.MaxRecordLine)
		for {
			m, err := rd.Next()
			if err != nil {
				return
			}
			f.msgs <- string(m.Raw)
		}
	}()
	t.Cleanup(func() { r.Close() })
	return f
}

// next is the next message forwarded.
func (f *forwarded) next(t *testing.T, what string) string {
	t.Helper()
	return within(t, f.msgs, what)
}

// expect checks that the next messages forwarded are want, in order.
func (f *forwarded) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := f.next(t, "a message"); got != w {
			t.Fatalf("forwarded %s, want %s", got, w)
		}
	}
}

// none checks that nothing more was forwarded.
func (f *forwarded) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-f.msgs:
		t.Fatalf("forwarded %s, want nothing more", m)
	default:
	}
}

// carriedPair is gatedPair with the run's carried lines forwarded.
func carriedPair(t *testing.T, store *gatedStore, id string) (*Client, *forwarded) {
	t.Helper()
	f := newForwarded(t)
	store.forward = f.w
	return gatedPair(t, store, id), f
}

// A message toward the client never waits for a commit: while the store
// holds the write of one append, the messages of the next are forwarded;
// the records are committed, in order, once the store lets them go.
func TestCarriedMessagesDoNotWaitForTheCommit(t *testing.T) {
	store, id := newGatedStore(t)
	c, f := carriedPair(t, store, id)
	w, _ := c.CarriedTranscript(t.Context(), id)
	if err := sent(t, w, record(1, "from_agent", "one")); err != nil {
		t.Fatal(err)
	}
	if got := f.next(t, "the first message"); got != message("one") {
		t.Fatalf("forwarded %s, want %s", got, message("one"))
	}
	within(t, store.entered, "the store to get the first append")
	if err := sent(t, w, record(2, "from_agent", "two")); err != nil {
		t.Fatal(err)
	}
	if got := f.next(t, "the second message while the store holds the first append"); got != message("two") {
		t.Fatalf("forwarded %s, want %s", got, message("two"))
	}
	go func() { store.gate <- struct{}{}; store.gate <- struct{}{} }()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got string
	for range 2 {
		got += strings.TrimPrefix(within(t, store.log, "the store's writes"), "transcript ")
	}
	if want := record(1, "from_agent", "one") + record(2, "from_agent", "two"); got != want {
		t.Fatalf("the store has\n%s\nwant\n%s", got, want)
	}
}

// The store keeps records only: a message carried alone (history replayed
// while a session loads) is forwarded and not stored; a record tagged as
// stored apart is stored untagged and not forwarded; the records of
// messages toward the agent are stored and not forwarded (M5).
func TestCarriedLinesAreStoredAsRecords(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	s := newRawStream(t, &Server{Store: store, Session: id, Forward: f.w})
	lines := record(1, "to_agent", "prompt") +
		string(acp.CarriedForward) + message("replayed") + "\n" +
		string(acp.CarriedForward) + message("the key is sk-1") + "\n" +
		string(acp.CarriedStored) + record(2, "from_agent", "the key is [REDACTED:key]") +
		record(3, "from_agent", "plain")
	if resp := s.call(request{ID: 1, Op: OpAppend, Session: id, Data: []byte(lines)}); resp.Error != "" {
		t.Fatalf("the append: %+v", resp)
	}
	f.expect(t, message("replayed"), message("the key is sk-1"), message("plain"))
	f.none(t)
	want := record(1, "to_agent", "prompt") + record(2, "from_agent", "the key is [REDACTED:key]") + record(3, "from_agent", "plain")
	if got := storetest.ReadTranscript(t, store, id); got != want {
		t.Fatalf("the transcript holds\n%s\nwant\n%s", got, want)
	}
}

// Lines cut short would run into the next append's: the append is
// refused, nothing of it is forwarded or stored, and the run's later
// writes are refused as after any failed append.
func TestCarriedLinesCutShortAreRefused(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	s := newRawStream(t, &Server{Store: store, Session: id, Forward: f.w})
	cut := strings.TrimSuffix(record(1, "from_agent", "one"), "\n")
	resp := s.call(request{ID: 1, Op: OpAppend, Session: id, Data: []byte(cut)})
	if !strings.Contains(resp.Error, "carried lines end with a line break") {
		t.Fatalf("an append of a line cut short was answered %+v", resp)
	}
	if resp := s.call(request{ID: 2, Op: OpPaused, Session: id, Pause: &lifecycle.PauseRecord{Reason: lifecycle.Idle, At: time.Now(), Run: 1}}); !strings.Contains(resp.Error, "failed before") {
		t.Fatalf("a report after the refused append was answered %+v", resp)
	}
	f.none(t)
	if got := storetest.ReadTranscript(t, store, id); got != "" {
		t.Fatalf("the transcript holds %q", got)
	}
}

// Once an append failed, the run's transcript misses lines and its reports
// are refused (L7), but the session goes on: the messages of later
// appends still reach the client, and only Close tells of the failure.
func TestCarriedAppendsGoOnAfterAFailedOne(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	c := served(t, &Server{Store: brokenTranscript{store}, Session: id, Forward: f.w})
	w, _ := c.CarriedTranscript(t.Context(), id)
	if _, err := io.WriteString(w, record(1, "from_agent", "one")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1})
	testsupport.WantErr(t, err, "disk full")
	if _, err := io.WriteString(w, record(2, "from_agent", "two")); err != nil {
		t.Fatalf("a carried append after a failed one: %v", err)
	}
	f.expect(t, message("one"), message("two"))
	testsupport.WantErr(t, w.Close(), "disk full")
}

// An append sent again after its stream broke is forwarded once: the
// server that read it commits it, and answers it again on the next stream
// without forwarding it again; one it never read is forwarded then.
func TestACarriedAppendSentAgainIsForwardedOnce(t *testing.T) {
	store, id := newGatedStore(t)
	f := newForwarded(t)
	srv := &Server{Store: store, Session: id, Run: 1, Forward: f.w}
	r, c := newTestRunner(t)
	first := r.attach(srv, false)
	w, _ := c.CarriedTranscript(t.Context(), id)
	for i, text := range []string{"one", "two", "three"} {
		if err := sent(t, w, record(i+1, "from_agent", text)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			within(t, store.entered, "the first append's commit")
		}
	}
	r.cutWhileHeld(store.gate, first)
	r.attach(srv, false)
	if err := w.Close(); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	f.expect(t, message("one"), message("two"), message("three"))
	f.none(t)
	want := record(1, "from_agent", "one") + record(2, "from_agent", "two") + record(3, "from_agent", "three")
	if got := storetest.ReadTranscript(t, store.RunStore.(*filestore.Store), id); got != want {
		t.Fatalf("transcript %q, want %q: each record once", got, want)
	}
}

// appendsRead is a Forward that passes on a copy of each append the server
// read.
type appendsRead chan []byte

func (a appendsRead) Write(p []byte) (int, error) {
	a <- bytes.Clone(p)
	return len(p), nil
}

// A transcript's write is cut at its lines, each piece as long as fits in
// the size, or one line when that alone is longer; no byte is lost.
func TestAWriteIsCutAtItsLines(t *testing.T) {
	for _, c := range []struct {
		p    string
		size int
		want string
	}{
		{"ab\ncd\n", 10, "ab\ncd\n"},
		{"ab\ncd\n", 6, "ab\ncd\n"},
		{"ab\ncd\n", 5, "ab\n"},
		{"ab\ncd\n", 3, "ab\n"},
		{"ab\ncd\n", 2, "ab\n"},
		{"abcdef\ng\n", 3, "abcdef\n"},
		{"abcdef", 3, "abcdef"},
		{"ab\ncdef", 4, "ab\n"},
	} {
		if got := string(leadingLines([]byte(c.p), c.size)); got != c.want {
			t.Errorf("leadingLines(%q, %d) = %q, want %q", c.p, c.size, got, c.want)
		}
	}
}

// A Writer's batch may hold more than an append should: a backlog, or a
// long message whose record redaction changed (two lines of that size).
// The transcript cuts it at its lines into appends of at most appendSize,
// or of one line when that alone is longer: every message reaches the
// client, and the records are stored.
func TestABatchIsAppendedInPiecesOfWholeLines(t *testing.T) {
	store, id := newStore(t)
	appends := make(appendsRead, 1024)
	w, _ := served(t, &Server{Store: store, Session: id, Forward: appends}).CarriedTranscript(t.Context(), id)

	long := strings.Repeat("x", appendSize)
	redacted := strings.Repeat("y", len(long))
	batch := [][]byte{
		[]byte(string(acp.CarriedForward) + message(long) + "\n"),
		[]byte(string(acp.CarriedStored) + record(1, "from_agent", redacted)),
	}
	var stored strings.Builder
	stored.WriteString(record(1, "from_agent", redacted))
	const small = 6000 // of 1 KiB: more than an append
	for i := range small {
		line := record(i+2, "from_agent", strings.Repeat("s", 1<<10))
		batch = append(batch, []byte(line))
		stored.WriteString(line)
	}
	if err := w.(acp.BuffersWriter).WriteBuffers(batch); err != nil {
		t.Fatalf("the batch: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("the transcript: %v", err)
	}
	close(appends)

	var all []byte
	n := 0
	for p := range appends {
		n++
		if lines := bytes.Count(p, newline); len(p) > appendSize && lines != 1 {
			t.Errorf("append %d: %d bytes of %d lines, more than an append takes (%d)", n, len(p), lines, appendSize)
		}
		all = append(all, p...)
	}
	if want := bytes.Join(batch, nil); n < 4 || !bytes.Equal(all, want) {
		t.Fatalf("%d appends hold %d bytes, want the batch's %d, in order, in 4 or more", n, len(all), len(want))
	}
	rd := acp.NewCarriedReader(bytes.NewReader(all), 0)
	for i := range small + 1 {
		m, err := rd.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if i == 0 && string(m.Raw) != message(long) {
			t.Fatalf("the first message has %d bytes, want the long one, of %d", len(m.Raw), len(message(long)))
		}
	}
	if got := storetest.ReadTranscript(t, store, id); got != stored.String() {
		t.Fatalf("the transcript holds %d bytes, want the %d of the records", len(got), stored.Len())
	}
}

// The record of a message as long as a Reader takes is longer than the
// message: an append and the reader of what is forwarded take it, and
// the message reaches the client.
func TestTheRecordOfTheLongestMessageIsCarried(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	w, _ := served(t, &Server{Store: store, Session: id, Forward: f.w}).CarriedTranscript(t.Context(), id)
	text := strings.Repeat("x", acp.DefaultMaxLine-len(message("")))
	longest, rec := message(text), record(1, "from_agent", text)
	if len(rec) <= acp.DefaultMaxLine || len(longest) != acp.DefaultMaxLine {
		t.Fatalf("a record of %d bytes, of a message of %d: the test is wrong", len(rec), len(longest))
	}
	if _, err := io.WriteString(w, rec); err != nil {
		t.Fatal(err)
	}
	if got := f.next(t, "the longest message"); got != longest {
		t.Fatalf("forwarded %d bytes, want the message of %d", len(got), len(longest))
	}
	if err := w.Close(); err != nil {
		t.Fatalf("the transcript: %v", err)
	}
	if got := storetest.ReadTranscript(t, store, id); got != rec {
		t.Fatalf("the transcript holds %d bytes, want the record's %d", len(got), len(rec))
	}
}

// A line longer than the server reads is not sent: the run says so in an
// append, which the server refuses as a failed append, so that it stores
// nothing of the run from there on (the transcript ends where lines went
// missing) and Close tells of it. The message of the record still reaches
// the client, alone, and so do those of the appends after it.
func TestALineLongerThanAnAppendCanHoldIsRefused(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	w, _ := served(t, &Server{Store: store, Session: id, Forward: f.w}).CarriedTranscript(t.Context(), id)
	text := strings.Repeat("z", maxData-2-len(message("")))
	long, tooLong := message(text), record(2, "from_agent", text)
	if len(tooLong) <= maxData || len(long)+2 != maxData {
		t.Fatalf("a record of %d bytes, of a message of %d: the test is wrong", len(tooLong), len(long))
	}
	for _, line := range []string{record(1, "from_agent", "one"), tooLong, record(3, "from_agent", "three")} {
		if _, err := io.WriteString(w, line); err != nil {
			t.Fatalf("a carried write: %v", err)
		}
	}
	f.expect(t, message("one"))
	if got := f.next(t, "the message of the line too long"); got != long {
		t.Fatalf("forwarded %d bytes, want the message of %d", len(got), len(long))
	}
	f.expect(t, message("three"))
	testsupport.WantErr(t, w.Close(), fmt.Sprintf("the run lost lines: a line of %d bytes (at most %d) was not sent", len(tooLong), maxData))
	if got, want := storetest.ReadTranscript(t, store, id), record(1, "from_agent", "one"); got != want {
		t.Fatalf("the transcript holds %.200q, want only %q", got, want)
	}
}

// unopenedTranscript is a store whose transcripts do not open.
type unopenedTranscript struct{ lifecycle.RunStore }

func (unopenedTranscript) Transcript(context.Context, string) (io.WriteCloser, error) {
	return nil, errors.New("the disk is gone")
}

// uncertainTranscript is a store that cannot tell which calls of a run
// its transcript holds.
type uncertainTranscript struct{ lifecycle.RunStore }

func (uncertainTranscript) TranscriptCall(context.Context, string, int) (uint64, error) {
	return 0, errors.New("the index is unreadable")
}

// A server that restarted is in doubt about the appends the run sent
// before: it asks the store which it committed. Those it did not are
// forwarded whatever comes of their commit, as the appends read in order
// are: when the transcript does not open, or the store cannot tell (then
// none is taken as committed), the appends fail and their messages still
// reach the client.
func TestAppendsInDoubtAreForwardedWhenTheirCommitFails(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(lifecycle.RunStore) lifecycle.RunStore
		err   string
	}{
		{"unopened", func(s lifecycle.RunStore) lifecycle.RunStore { return unopenedTranscript{s} }, "the disk is gone"},
		{"uncertain", func(s lifecycle.RunStore) lifecycle.RunStore { return uncertainTranscript{s} }, "the index is unreadable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, id := newStore(t)
			f := newForwarded(t)
			s := newRawStream(t, &Server{Store: c.store(store), Session: id, Run: 1, Forward: f.w})
			s.send(request{Op: OpResync, Resync: 2, Sent: 2})
			for i, text := range []string{"one", "two"} {
				resp := s.call(request{ID: uint64(i + 1), Op: OpAppend, Session: id, Data: []byte(record(i+1, "from_agent", text))})
				if !strings.Contains(resp.Error, c.err) {
					t.Fatalf("append %d in doubt was answered %+v, want %q", i+1, resp, c.err)
				}
			}
			f.expect(t, message("one"), message("two"))
		})
	}
}

// An append in doubt whose lines are cut short is refused and not
// forwarded; the appends read with it, committed in one batch, are
// forwarded all the same.
func TestAnAppendInDoubtRefusedDoesNotStopTheNext(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	s := newRawStream(t, &Server{Store: store, Session: id, Run: 1, Forward: f.w})
	s.send(request{Op: OpResync, Resync: 2, Sent: 2})
	cut := strings.TrimSuffix(record(1, "from_agent", "one"), "\n")
	go func() {
		// One write: the server reads them together, as one batch.
		for i, data := range []string{cut, record(2, "from_agent", "two")} {
			_ = writeFrame(s.w, request{ID: uint64(i + 1), Op: OpAppend, Session: id, Size: len(data)}, []byte(data))
		}
		_ = s.w.Flush()
	}()
	for i := range 2 {
		var resp response
		if _, err := readData(s.r, &resp, func() int { return resp.Size }); err != nil {
			t.Fatalf("no answer to append %d: %v", i+1, err)
		}
		if !strings.Contains(resp.Error, "carried lines end with a line break") {
			t.Fatalf("append %d, of a batch with one cut short, was answered %+v", i+1, resp)
		}
	}
	f.expect(t, message("two"))
	f.none(t)
}

// Deflated lines are not carried lines: the server refuses them, whichever
// way it reads them, and forwards nothing of them.
func TestDeflatedCarriedLinesAreRefused(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	s := newRawStream(t, &Server{Store: store, Session: id, Forward: f.w})
	resp := s.call(request{ID: 1, Op: OpAppend, Session: id, Deflated: true, Data: []byte(record(1, "from_agent", "one"))})
	if !strings.Contains(resp.Error, "not deflated") {
		t.Fatalf("a deflated carried append was answered %+v", resp)
	}
	f.none(t)
}

// A server that restarted does not know that an append of the run failed:
// the run tells it as it sends its calls again, and the new server stores
// nothing more of the run either, while it still forwards its messages.
func TestARestartedServerKnowsThatTheRunLostLines(t *testing.T) {
	store, id := newStore(t)
	f := newForwarded(t)
	r, c := newTestRunner(t)
	r.attach(&Server{Store: store, Session: id, Run: 1, Forward: f.w}, false)
	w, _ := c.CarriedTranscript(t.Context(), id)
	for _, line := range []string{record(1, "from_agent", "one"), strings.TrimSuffix(record(2, "from_agent", "two"), "\n")} {
		if _, err := io.WriteString(w, line); err != nil {
			t.Fatal(err)
		}
	}
	// Answered after the appends: the run knows of the refused one.
	_, err := c.Paused(t.Context(), id, lifecycle.PauseRecord{Reason: lifecycle.Idle, At: time.Now(), Run: 1})
	testsupport.WantErr(t, err, "carried lines end with a line break")
	f.expect(t, message("one"))
	r.cut()
	r.attach(&Server{Store: store, Session: id, Run: 1, Forward: f.w}, false)
	if _, err := io.WriteString(w, record(3, "from_agent", "three")); err != nil {
		t.Fatal(err)
	}
	f.expect(t, message("three"))
	testsupport.WantErr(t, w.Close(), "carried lines end with a line break")
	if got, want := storetest.ReadTranscript(t, store, id), record(1, "from_agent", "one"); got != want {
		t.Fatalf("the transcript holds %q, want only %q: nothing after the lines lost", got, want)
	}
}

// The appends committed together are written up to the first one
// refused: those before it are stored, it and those after it fail.
func TestAppendsBeforeARefusedOneInABatchAreStored(t *testing.T) {
	store, id := newGatedStore(t)
	c, f := carriedPair(t, store, id)
	w, _ := c.CarriedTranscript(t.Context(), id)
	if err := sent(t, w, record(1, "from_agent", "one")); err != nil {
		t.Fatal(err)
	}
	within(t, store.entered, "the store to hold the first append")
	// Read while the first is committed: the next batch.
	for _, line := range []string{record(2, "from_agent", "two"), strings.TrimSuffix(record(3, "from_agent", "three"), "\n"), record(4, "from_agent", "four")} {
		if err := sent(t, w, line); err != nil {
			t.Fatal(err)
		}
	}
	f.expect(t, message("one"), message("two"), message("four"))
	go func() { store.gate <- struct{}{}; store.gate <- struct{}{} }()
	testsupport.WantErr(t, w.Close(), "call 3: carried lines end with a line break")
	var got string
	for range 2 {
		got += strings.TrimPrefix(within(t, store.log, "the store's writes"), "transcript ")
	}
	if want := record(1, "from_agent", "one") + record(2, "from_agent", "two"); got != want {
		t.Fatalf("the store has\n%s\nwant\n%s", got, want)
	}
}
