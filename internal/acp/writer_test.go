package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	msg := []byte(`{"jsonrpc":"2.0","method":"a"}`)
	if err := w.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(NewNotification("b", nil)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte("{\"method\":\n\"c\"}")); err == nil {
		t.Error("no error for a message with a line break")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n"
	if buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
}

// countingWriter records the size of each Write.
type countingWriter struct {
	mu     sync.Mutex
	writes []int
	buf    bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, len(p))
	return w.buf.Write(p)
}

func TestWriterConcurrent(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				params := fmt.Sprintf(`{"g":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("p", i*37))
				var err error
				switch i % 3 {
				case 0:
					err = w.Write(NewNotification("n", []byte(params)))
				case 1:
					err = w.Write([]byte(`{"method":"n","params":` + params + `}`))
				default:
					err = w.WriteMessage(mustParse([]byte(`{"method":"n","params":`+params+`}`)), Pace(i/3%3))
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs, errs := collect(t, NewReader(&cw.buf, 0))
	// Messages gathered while a write is in progress go out together.
	if len(msgs) != 800 || len(errs) != 0 || len(cw.writes) > 800 {
		t.Errorf("%d messages, %d errors, %d writes", len(msgs), len(errs), len(cw.writes))
	}
	// Each goroutine's messages keep their order, however they were written.
	next := map[int]int{}
	for _, m := range msgs {
		var p struct{ G, I int }
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.I != next[p.G] {
			t.Fatalf("goroutine %d: message %d where %d was due", p.G, p.I, next[p.G])
		}
		next[p.G]++
	}
}

// WriteMessage on an idle Writer, with nothing more to come, has written
// the message when it returns.
func TestWriterWriteMessageAtOnce(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	if err := w.WriteMessage(mustParse([]byte(`{"method":"a"}`)), Now); err != nil {
		t.Fatal(err)
	}
	cw.mu.Lock()
	got := cw.buf.String()
	cw.mu.Unlock()
	if got != "{\"method\":\"a\"}\n" {
		t.Fatalf("after WriteMessage the stream holds %q", got)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriterReportsWriteErrors(t *testing.T) {
	w := NewWriter(failingWriter{})
	if err := w.Write(NewNotification("a", nil)); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "closed pipe") {
		t.Fatalf("flush: %v", err)
	}
	if err := w.Write(NewNotification("b", nil)); err == nil {
		t.Fatal("a write after a failure succeeded")
	}
}

// Lines a Reader read one after another in its block are one piece of the
// queue; a line ended by "\r\n", a built message and a line of another
// Reader are pieces of their own, and copies made by Write follow one
// another in the Writer's own buffer.
func TestWriterQueuesConsecutiveLinesAsOnePiece(t *testing.T) {
	r := NewReader(strings.NewReader("{\"method\":\"a\"}\n{\"method\":\"b\"}\n{\"method\":\"c\"}\r\n{\"method\":\"d\"}\n"), 0)
	other := NewReader(strings.NewReader("{\"method\":\"e\"}\n"), 0)
	w := &Writer{flushing: true} // as if a write were under way
	var want strings.Builder
	for _, rd := range []*Reader{r, r, r, r, other} {
		m, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.line == nil {
			w.add(nil, Behind, part{m.Raw, false}, part{newline, false})
		} else {
			w.enqueue(m.line)
		}
		want.WriteString(string(m.Raw) + "\n")
	}
	w.enqueue(append(NewNotification("f", nil), '\n'))
	want.WriteString(`{"jsonrpc":"2.0","method":"f"}` + "\n")
	var pieces []string
	for _, p := range w.queue {
		pieces = append(pieces, string(p))
	}
	wantPieces := []string{
		"{\"method\":\"a\"}\n{\"method\":\"b\"}\n", // read one after the other
		"{\"method\":\"c\"}\n",                     // its "\r" is gone: a copy
		"{\"method\":\"d\"}\n",
		"{\"method\":\"e\"}\n", // another Reader's block
		"{\"jsonrpc\":\"2.0\",\"method\":\"f\"}\n",
	}
	if strings.Join(pieces, "|") != strings.Join(wantPieces, "|") {
		t.Errorf("pieces %q, want %q", pieces, wantPieces)
	}
	if w.queued != want.Len() {
		t.Errorf("queued %d bytes, want %d", w.queued, want.Len())
	}

	c := &Writer{flushing: true}
	c.add(nil, Behind, part{[]byte(`{"method":"x"}`), false}, part{newline, false})
	c.add(nil, Behind, part{[]byte(`{"method":"y"}`), false}, part{newline, false})
	if len(c.queue) != 1 || string(c.queue[0]) != "{\"method\":\"x\"}\n{\"method\":\"y\"}\n" {
		t.Errorf("copies queued as %q", c.queue)
	}
}

// A pipe that the reading side drains slowly takes a batch of thousands of
// pieces in several writev calls, partial ones among them; the stream holds
// every message once, in order: a pipe in non-blocking mode (waited for
// through the runtime's poller) or blocking (in the kernel), with the raw
// writes or where the kernel refuses them.
func TestWriterWritevOnASlowPipe(t *testing.T) {
	for _, mode := range []string{"pollable", "blocking", "pollable-refused", "blocking-refused"} {
		t.Run(mode, func(t *testing.T) {
			if strings.HasSuffix(mode, "-refused") {
				refuseRawCalls(t)
			}
			pr, pw := pipeIn(t, strings.HasPrefix(mode, "pollable"))
			writeSlowly(t, pr, pw)
		})
	}
}

func writeSlowly(t *testing.T, pr, pw *os.File) {
	w := NewWriter(pw)
	if w.vec == nil {
		t.Skip("no writev here")
	}
	const n = 3000
	var want bytes.Buffer
	var queueErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			// Built one by one, each line lies apart from the others.
			raw := NewNotification("n", fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, strings.Repeat("p", i%700)))
			want.Write(raw)
			want.WriteByte('\n')
			pace := Now
			if i < n-1 {
				pace = WithNext
			}
			if err := w.WriteMessage(mustParse(raw), pace); err != nil {
				queueErr = err
				return
			}
		}
		queueErr = w.Flush()
		pw.Close()
	}()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for {
		k, err := pr.Read(buf)
		got.Write(buf[:k])
		if err != nil {
			break
		}
	}
	<-done
	if queueErr != nil {
		t.Fatal(queueErr)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("the stream holds %d bytes, want %d, or differs", got.Len(), want.Len())
	}
}

func TestAdvance(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "ab|cde|f"}, {1, "b|cde|f"}, {2, "cde|f"}, {4, "e|f"}, {5, "f"}, {6, ""}} {
		bufs := [][]byte{[]byte("ab"), []byte("cde"), []byte("f")}
		var parts []string
		for _, b := range advance(bufs, tc.n) {
			parts = append(parts, string(b))
		}
		if got := strings.Join(parts, "|"); got != tc.want {
			t.Errorf("advance(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// gateWriter holds its nth Write until released, and keeps what it got.
type gateWriter struct {
	mu      sync.Mutex
	calls   int
	gate    int
	entered chan struct{}
	release chan struct{}
	out     bytes.Buffer
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.calls++
	n := g.calls
	g.mu.Unlock()
	if n == g.gate {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.Write(p)
}

// After a batch too large for its buffer to be kept, the next batch's
// buffer is still not the one the queue fills while that batch is written.
func TestWriterNeverSharesABufferBetweenBatches(t *testing.T) {
	g := &gateWriter{gate: 3, entered: make(chan struct{}), release: make(chan struct{})}
	w := NewWriter(g)
	for _, raw := range []string{`{"a":1}`, `{"big":"` + strings.Repeat("x", 2*maxPending) + `"}`} {
		if err := w.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write([]byte(`{"AAAAAAAA":1}`)); err != nil { // written while held
		t.Fatal(err)
	}
	<-g.entered
	if err := w.Write([]byte(`{"BBBBBBBB":2}`)); err != nil { // queued meanwhile
		t.Fatal(err)
	}
	close(g.release)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "{\"AAAAAAAA\":1}\n{\"BBBBBBBB\":2}\n"; !strings.HasSuffix(g.out.String(), want) {
		t.Errorf("the stream ends %q, want %q", g.out.String()[g.out.Len()-len(want):], want)
	}
}

// Lines that cannot be joined (every other one ended by "\r\n", so
// copied) queue up behind a full pipe of 4 KiB into a batch of more pieces
// than one writev takes; pollable and blocking pipes get every byte in
// order.
func TestWriterWritevManyPieces(t *testing.T) {
	for _, mode := range []string{"pollable", "blocking"} {
		t.Run(mode, func(t *testing.T) {
			pr, pw := pipeIn(t, mode == "pollable")
			var in strings.Builder
			for i := range 5000 {
				end := "\n"
				if i%2 == 1 {
					end = "\r\n"
				}
				fmt.Fprintf(&in, "{\"method\":\"m\",\"params\":{\"i\":%d,\"p\":%q}}%s", i, strings.Repeat("x", i%300), end)
			}
			want := strings.ReplaceAll(in.String(), "\r\n", "\n")
			r := NewReader(strings.NewReader(in.String()), 0)
			w := NewWriter(pw)
			if w.vec == nil {
				t.Skip("no writev here")
			}
			if _, err := unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
				t.Fatal(err)
			}
			most := 0
			queued := make(chan error, 1)
			go func() {
				for {
					m, err := r.Next()
					if err == io.EOF {
						break
					}
					if err == nil {
						err = w.WriteMessage(m, Behind)
					}
					if err != nil {
						queued <- err
						return
					}
					m.Release()
					w.mu.Lock()
					most = max(most, len(w.queue))
					w.mu.Unlock()
				}
				queued <- nil
			}()
			// The pipe stays full until everything is queued.
			if err := <-queued; err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- w.Flush()
				pw.Close()
			}()
			var got []byte
			buf := make([]byte, 1000)
			for {
				n, err := pr.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("got %d bytes, want %d, or they differ", len(got), len(want))
			}
			if most <= maxIovecs {
				t.Errorf("at most %d pieces were queued, not more than one writev takes (%d)", most, maxIovecs)
			}
		})
	}
}

// WriteReplacing writes a message with one part replaced, for a line a
// Reader read (queued as slices of its block around the new part, its holds
// dropped once written) and for a built message; a part that is not the
// message's is refused.
func TestWriterWriteReplacingCopiesOnlyTheNewPart(t *testing.T) {
	r := NewReader(strings.NewReader(`{"method":"session/update","params":{"sessionId":"agent-1","update":{}}}`+"\n"), 0)
	read, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	built, err := Parse([]byte(`{"id":1,"method":"session/prompt","params":{"sessionId":"agent-1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, m := range []*Message{read, built} {
		old := m.Params[bytes.Index(m.Params, []byte(`"agent-1"`)):][:len(`"agent-1"`)]
		if err := w.WriteReplacing(m, old, []byte(`"blaise-42"`), Behind); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"method":"session/update","params":{"sessionId":"blaise-42","update":{}}}` + "\n" +
		`{"id":1,"method":"session/prompt","params":{"sessionId":"blaise-42"}}` + "\n"
	if buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
	if read.blk.holds.Load() != 2 { // the Reader's and the message's
		t.Errorf("the read block has %d holds once written, want 2", read.blk.holds.Load())
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic for a part of another message")
		}
	}()
	_ = w.WriteReplacing(read, []byte(`"agent-1"`), nil, Now)
}

// TestMessagesWithMoreOnTheirWayLeaveInOneWrite: messages given
// WithNext wait for those announced after them, and the first message not
// followed by more takes them all in one write.
func TestMessagesWithMoreOnTheirWayLeaveInOneWrite(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	w.delay = time.Hour // a slow machine's loop must not outlast the wait: only the last message writes
	var want strings.Builder
	for i := range 10 {
		raw := NewNotification("n", fmt.Appendf(nil, `{"i":%d}`, i))
		want.Write(raw)
		want.WriteByte('\n')
		pace := WithNext
		if i == 9 {
			pace = Now
		}
		if err := w.WriteMessage(mustParse(raw), pace); err != nil {
			t.Fatal(err)
		}
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if len(cw.writes) != 1 || cw.buf.String() != want.String() {
		t.Errorf("%d writes of %q, want one of %q", len(cw.writes), cw.buf.String(), want.String())
	}
}

// TestAMessageWaitingForOthersThatDoNotComeGoesOut: a message
// given WithNext goes out on its own when nothing follows it, and Flush
// writes it at once.
func TestAMessageWaitingForOthersThatDoNotComeGoesOut(t *testing.T) {
	pr, pw := io.Pipe()
	w := NewWriter(pw)
	if err := w.WriteMessage(mustParse([]byte(`{"method":"alone"}`)), WithNext); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "{\"method\":\"alone\"}\n" {
		t.Fatalf("read %q, %v", line, err)
	}

	cw := &countingWriter{}
	w = NewWriter(cw)
	if err := w.WriteMessage(mustParse([]byte(`{"method":"flushed"}`)), WithNext); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.buf.String() != "{\"method\":\"flushed\"}\n" {
		t.Errorf("after Flush, wrote %q", cw.buf.String())
	}
}

// TestWithNextWritesOnceABatchIsFull: past batchBytes, the
// messages go out without waiting for more.
func TestWithNextWritesOnceABatchIsFull(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close() // the Writer's write of the lines not read fails, and ends
	w := NewWriter(pw)
	w.delay = time.Hour // only a full batch writes
	line := NewNotification("n", fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("p", 1000)))
	n := batchBytes/len(line) + 2
	for range n {
		if err := w.WriteMessage(mustParse(line), WithNext); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(pr)
	for i := range n - 1 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
}
