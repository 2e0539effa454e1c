package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// The records of a stream are written in the background, and a request's
// or response's record is written before Record returns, after every
// record before it: a transcript is current at each turn, in order (M5).
func TestM5_TranscriptHoldsEveryRecordBeforeATurnsAnswer(t *testing.T) {
	out := &testsupport.Buffer{}
	r := NewJSONLRecorder(out)
	update := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 1000) + `"}}`))
	n := 3*recordBatch/len(update.Raw) + 1 // a few background writes
	for range n {
		r.Record(ToClient, update, "")
	}
	r.Record(ToClient, mustParse([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)), "")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("the transcript has %d records once the answer is recorded, want %d", len(lines), n+1)
	}
	for i, line := range lines {
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if rec.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i+1, rec.Seq)
		}
	}
	if !bytes.Contains([]byte(lines[n]), []byte(`"kind":"response"`)) {
		t.Errorf("the last record is %.100s, want the answer", lines[n])
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// gatedWriter holds its first Write until open is closed.
type gatedWriter struct {
	testsupport.Buffer
	started, open chan struct{}
	first         bool
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	if !g.first {
		g.first = true
		close(g.started)
		<-g.open
	}
	return g.Buffer.Write(p)
}

// heldRecorder returns a recorder to a gatedWriter, and the update it
// recorded n times, two batches' worth: the first write is under way, held.
func heldRecorder() (g *gatedWriter, r *JSONLRecorder, update *Message, n int) {
	g = &gatedWriter{started: make(chan struct{}), open: make(chan struct{})}
	r = NewJSONLRecorder(g)
	update = mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 1000) + `"}}`))
	n = 2 * recordBatch / len(update.Raw)
	for range n {
		r.Record(ToClient, update, "")
	}
	<-g.started
	return g, r, update, n
}

// A stream's records wait for no write to the file: while the file takes a
// batch, the next records gather (M5 records everything, at no cost to the
// stream's pace).
func TestM5_StreamedRecordsDoNotWaitForTheFile(t *testing.T) {
	g, r, _, n := heldRecorder()
	close(g.open)
	r.Record(ToClient, mustParse([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)), "")
	if got := strings.Count(g.String(), "\n"); got != n+1 {
		t.Errorf("the transcript has %d records, want %d", got, n+1)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// Record times are written as time.RFC3339Nano writes them in UTC, from a
// second formatted once: whole seconds, trailing zeros, times before 1970
// and far ahead, and seconds that follow each other.
func TestRecordTimesAsRFC3339Nano(t *testing.T) {
	var st stamp
	base := time.Date(2026, 12, 1, 23, 59, 58, 0, time.FixedZone("x", 3600))
	var times []time.Time
	for _, ns := range []int{0, 1, 10, 100_000, 120_000_000, 999_999_999, 500_000_000, 123_456_789} {
		for _, sec := range []int64{0, 1, 2, 3, 86400} {
			times = append(times, base.Add(time.Duration(sec)*time.Second+time.Duration(ns)))
		}
	}
	times = append(times, time.Unix(-1, 5), time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999_999_990, time.UTC))
	for _, tm := range times {
		want := tm.UTC().Format(time.RFC3339Nano)
		if got := string(st.append(nil, tm)); got != want {
			t.Errorf("%v: got %s, want %s", tm, got, want)
		}
	}
}

// While the file takes a batch, the records that gather are copied once,
// into chunks with room for them, not moved again by a buffer's growth
// (a stream's transcript cost half the session process's time in
// copies).
func TestRecordsGatheredDuringAWriteAreCopiedOnce(t *testing.T) {
	g, r, update, n := heldRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := maxRecordBacklog / 2 / len(update.Raw)
	for range m {
		r.Record(ToClient, update, "")
	}
	runtime.ReadMemStats(&after)
	recorded := uint64(m * (len(update.Raw) + 100))
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > recorded+recordBatch {
		t.Errorf("recording %d bytes while a write was held allocated %d bytes", recorded, allocated)
	}
	close(g.open)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(g.String(), "\n"); got != n+m {
		t.Errorf("the transcript has %d records, want %d", got, n+m)
	}
}

// A notification recorded from the block it was read into is encoded by the
// background write, after the stream has gone on into other blocks: its
// record keeps the message's bytes, and the records stay in order among those
// encoded at once (notifications a plug made, requests) (M5; recording costs
// the stream's goroutine no copy).
func TestM5_ANotificationRecordedFromItsBlockKeepsItsBytes(t *testing.T) {
	var lines []string
	for i := range 3000 {
		lines = append(lines, string(NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"i":%d,"text":%q}}`, i, strings.Repeat("y", i%700)))))
	}
	// Blocks of 4 KiB, released as the proxy releases them: read into
	// again as soon as the recorder lets go.
	rd := newReaderSize(strings.NewReader(strings.Join(lines, "\n")+"\n"), 0, 4<<10)
	g := &gatedWriter{started: make(chan struct{}), open: make(chan struct{})}
	rec := NewJSONLRecorder(g)
	var want []string
	for i := range lines {
		m, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.blk == nil {
			t.Fatal("the Reader's message has no block")
		}
		rec.Record(ToClient, m, "")
		m.Release()
		want = append(want, lines[i])
		switch {
		case i%500 == 499: // a plug's own notification
			made := string(NewNotification("session/update", []byte(`{"sessionId":"s","update":{"made":true}}`)))
			rec.Record(ToClient, mustParse([]byte(made)), "p")
			want = append(want, made)
		case i == 2000: // a request, written at once with those before it
			req := `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}`
			close(g.open)
			rec.Record(ToClient, mustParse([]byte(req)), "")
			want = append(want, req)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	transcriptHolds(t, g.String(), want)
}

// transcriptHolds checks that the records of transcript are numbered from
// 1 and hold the messages want, in order.
func transcriptHolds(t *testing.T, transcript string, want []string) {
	t.Helper()
	var got []string
	for i, line := range strings.Split(strings.TrimSuffix(transcript, "\n"), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %d: %v: %.200s", i+1, err, line)
		}
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i+1, r.Seq)
		}
		got = append(got, string(r.Message))
	}
	if len(got) != len(want) {
		t.Fatalf("the transcript has %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d:\n%.200s\nwant\n%.200s", i+1, got[i], want[i])
		}
	}
}

// TestM5_NotificationsEncodedInTheBackgroundKeepTheirOrder: the background
// write encodes the records of notifications into chunks; a record larger
// than a chunk goes all the same, and every record is in order.
func TestM5_NotificationsEncodedInTheBackgroundKeepTheirOrder(t *testing.T) {
	var lines []string
	for i := range 3000 {
		text := strings.Repeat("z", i%900)
		if i == 1500 {
			text = strings.Repeat("Z", recordBatch+100)
		}
		lines = append(lines, string(NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"i":%d,"text":%q}}`, i, text))))
	}
	rd := NewReader(strings.NewReader(strings.Join(lines, "\n")+"\n"), 0)
	var w testsupport.Buffer
	rec := NewJSONLRecorder(&w)
	for range lines {
		m, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		rec.Record(ToClient, m, "")
		m.Release()
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	transcriptHolds(t, w.String(), lines)
}

// TestHoldsOfARunOfOneBlockAreDroppedTogether: the holds of records
// encoded one after the other are dropped when a record of another block
// comes, and the last ones at release, each block's count by its own.
func TestHoldsOfARunOfOneBlockAreDroppedTogether(t *testing.T) {
	a, b := &block{}, &block{}
	a.holds.Store(4)
	b.holds.Store(2)
	var h holds
	h.add(a)
	h.add(a)
	h.add(a)
	if n := a.holds.Load(); n != 4 {
		t.Fatalf("a has %d holds while its run goes on, want 4", n)
	}
	h.add(b)
	if n := a.holds.Load(); n != 1 {
		t.Fatalf("a has %d holds after its run, want 1", n)
	}
	h.add(b)
	h.release()
	if n := b.holds.Load(); n != 0 {
		t.Fatalf("b has %d holds after release, want 0", n)
	}
	h.release()
	if a.holds.Load() != 1 || b.holds.Load() != 0 {
		t.Fatal("a second release dropped holds again")
	}
}
