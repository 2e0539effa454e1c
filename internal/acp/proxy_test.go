package acp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"

	"github.com/charmbracelet/log"
)

// smallBlocks returns a Reader of 400 lines, line i formatted from format
// and i, in blocks of 256 bytes.
func smallBlocks(format string) *Reader {
	var in strings.Builder
	for i := range 400 {
		fmt.Fprintf(&in, format, i)
	}
	return newReaderSize(strings.NewReader(in.String()), 0, 256)
}

// each calls f with each message of r in turn, to the end of the stream;
// any error fails the test.
func each(t *testing.T, r *Reader, f func(*Message)) {
	t.Helper()
	for {
		m, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(m)
	}
}

// A block goes back to its Reader when every message read from it is
// released, and is read into again; a message still held keeps its block
// and its bytes.
func TestReaderReusesReleasedBlocks(t *testing.T) {
	r := smallBlocks("{\"method\":\"m\",\"params\":%d}\n")
	kept, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	keptRaw := string(kept.Raw)
	released := map[*block]bool{}
	reused := 0
	movedOn := false // the Reader left the kept message's block
	each(t, r, func(m *Message) {
		switch {
		case m.blk != kept.blk:
			movedOn = true
		case movedOn:
			t.Fatal("the block of a message still held was read into again")
		}
		if released[m.blk] {
			reused++
			delete(released, m.blk)
		}
		if m.blk != kept.blk {
			released[m.blk] = true
		}
		m.Release()
	})
	if string(kept.Raw) != keptRaw {
		t.Fatalf("a held message changed: %q, was %q", kept.Raw, keptRaw)
	}
	if reused == 0 {
		t.Error("no released block was read into again")
	}
}

// With no pipeline the proxy releases what it forwards, so its Readers
// read into the same blocks again and again; every byte still arrives as
// sent, in both directions, and every answer finds its request.
func TestProxyForwardsEveryByteWhileReusingBlocks(t *testing.T) {
	clientR, toProxy, _ := os.Pipe()
	fromProxy, clientW, _ := os.Pipe()
	agentR, toAgent, _ := os.Pipe()
	fromAgent, agentW, _ := os.Pipe()
	p := &Proxy{
		FromClient: NewReader(clientR, 0), ToClient: NewWriter(clientW),
		FromAgent: NewReader(fromAgent, 0), ToAgent: NewWriter(toAgent),
		Log: log.New(io.Discard),
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()); clientW.Close(); toAgent.Close() }()

	const updates, requests = 6000, 500
	// The agent answers each request and streams updates of many sizes,
	// some of their lines ended by "\r\n".
	var sent bytes.Buffer
	agentDone := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(agentW)
		for i := range updates {
			line := string(NewNotification("session/update", fmt.Appendf(nil, `{"i":%d,"text":%q}`, i, strings.Repeat("x", i*7919%3000))))
			sent.WriteString(line + "\n")
			end := "\n"
			if i%97 == 0 {
				end = "\r\n"
			}
			w.WriteString(line + end)
		}
		w.Flush()
		sc := bufio.NewScanner(agentR)
		for n := 0; n < requests && sc.Scan(); n++ {
			m, err := Parse(sc.Bytes())
			if err != nil {
				agentDone <- err
				return
			}
			fmt.Fprintf(agentW, "%s\n", NewResponse(m.ID, m.Params))
		}
		agentDone <- sc.Err()
	}()
	go func() {
		for i := range requests {
			fmt.Fprintf(toProxy, "%s\n", NewRequest(fmt.Appendf(nil, "%d", i), "_echo", fmt.Appendf(nil, `{"n":%d}`, i)))
		}
	}()

	got := bufio.NewReaderSize(fromProxy, 1<<20)
	var updatesGot bytes.Buffer
	answers := map[string]bool{}
	for len(answers) < requests || updatesGot.Len() < sent.Len() {
		line, err := got.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d bytes of updates and %d answers: %v", updatesGot.Len(), len(answers), err)
		}
		m, err := Parse(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == Response {
			if want := fmt.Sprintf(`{"n":%s}`, m.ID); string(m.Result) != want {
				t.Fatalf("answer %s: %s, want %s", m.ID, m.Result, want)
			}
			answers[string(m.ID)] = true
			continue
		}
		updatesGot.Write(line)
	}
	if err := <-agentDone; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(updatesGot.Bytes(), sent.Bytes()) {
		t.Fatalf("the client got %d bytes of updates that differ from the %d sent", updatesGot.Len(), sent.Len())
	}
	agentW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(p.FromAgent.free) == 0 {
		t.Error("no block of the agent's stream came back to be read into again")
	}
}

// A copy of a message made by With… keeps the block of its bytes, even
// when the original is released.
func TestACopyOfAMessageKeepsItsBlock(t *testing.T) {
	r := smallBlocks("{\"method\":\"m%d\"}\n")
	m, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	c := m.WithParams(nil) // no params to remove: a copy
	m.Release()
	each(t, r, (*Message).Release)
	if string(c.Raw) != `{"method":"m0"}` || c.Method != "m0" {
		t.Fatalf("the copy changed to %q", c.Raw)
	}
}

// A request that reaches the agent's side once the agent is gone (a plug
// held it while the agent died at startup) gets the answer of one the agent
// left unanswered, so that its client tells that the run ended on its own.
func TestProxyRequestAfterTheAgentIsGoneIsAnsweredAsStopped(t *testing.T) {
	clientR, toProxy, _ := os.Pipe()
	fromProxy, clientW, _ := os.Pipe()
	_, toAgent, _ := os.Pipe()
	fromAgent, agentW, _ := os.Pipe()
	held, ended := make(chan struct{}), make(chan struct{})
	p := &Proxy{
		FromClient: NewReader(clientR, 0), ToClient: NewWriter(clientW),
		FromAgent: NewReader(fromAgent, 0), ToAgent: NewWriter(toAgent),
		Pipeline: holdingPipeline{held, ended},
		Log:      log.New(io.Discard),
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	fmt.Fprintf(toProxy, "%s\n", NewRequest([]byte("1"), "initialize", []byte(`{"protocolVersion":1}`)))
	<-held
	agentW.Close() // the agent is gone while a plug holds the request
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(ended)
	line, err := bufio.NewReader(fromProxy).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(AgentStoppedMessage)) {
		t.Fatalf("answer %s", line)
	}
}

// holdingPipeline holds each message until ended is closed, then forwards it.
type holdingPipeline struct{ held, ended chan struct{} }

func (h holdingPipeline) Handle(_ Side, m *Message, forward Forward) (*Message, string, bool, error) {
	close(h.held)
	<-h.ended
	return forward(m), "", false, nil
}

// A notification that no plug sees passes through the proxy without an
// allocation: its Forward is made once per side.
func TestProxyForwardsANotificationWithoutAllocating(t *testing.T) {
	p := &Proxy{ToClient: NewWriter(io.Discard), ToAgent: NewWriter(io.Discard)}
	p.init()
	m, err := Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { p.handle(ToClient, m, nil) }); allocs != 0 {
		t.Errorf("a notification allocates %v times on its way", allocs)
	}
}

// Reading a stream allocates nothing per message, in the proxy and in
// ReadMessages: only the Reader's blocks, now and then. The stream comes a
// line at a time, so that the proxy writes each message on its own
// goroutine, without a flusher's.
func TestReadingMessagesAllocatesNothingPerMessage(t *testing.T) {
	const n = 2000
	stream := bytes.Repeat(append(bytes.Clone(update1KiB), '\n'), n)
	perMessage := func(read func()) float64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		read()
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / n
	}
	p := &Proxy{ToClient: NewWriter(io.Discard), ToAgent: NewWriter(io.Discard), Log: log.New(io.Discard)}
	p.init()
	if allocs := perMessage(func() {
		if err := p.read(ToClient, NewReader(iotest.OneByteReader(bytes.NewReader(stream)), 0)); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0.1 {
		t.Errorf("the proxy allocates %.2f times per message it reads", allocs)
	}
	if allocs := perMessage(func() {
		for m := range ReadMessages(NewReader(bytes.NewReader(stream), 0), log.New(io.Discard), nil) {
			m.Release()
		}
	}); allocs > 0.1 {
		t.Errorf("ReadMessages allocates %.2f times per message", allocs)
	}
}

// ReadMessages shows each message to seen before sending it, telling which
// ended in a read of their own, and ends with nil: a watcher of a stream
// needs no goroutine of its own, and reads the clock once a read, not once a
// message.
func TestReadMessagesShowsEachMessageAndItsRead(t *testing.T) {
	pr, pw := io.Pipe()
	var (
		mu    sync.Mutex
		seen  []string
		fresh []bool
		ended = make(chan struct{})
	)
	ch := ReadMessages(NewReader(pr, 0), log.New(io.Discard), func(m *Message, f bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if m == nil {
			close(ended)
			return false
		}
		seen, fresh = append(seen, m.Method), append(fresh, f)
		// b is kept back.
		return m.Method != "b"
	})
	go func() {
		// Two messages in one write, then one in two writes.
		_, _ = pw.Write([]byte(`{"jsonrpc":"2.0","method":"a"}` + "\n" + `{"jsonrpc":"2.0","method":"b"}` + "\n"))
		_, _ = pw.Write([]byte(`{"jsonrpc":"2.0",`))
		_, _ = pw.Write([]byte(`"method":"c"}` + "\n"))
		pw.Close()
	}()
	var got []string
	for m := range ch {
		mu.Lock()
		if !slices.Contains(seen, m.Method) {
			t.Errorf("message %s was sent before seen saw it: %v", m.Method, seen)
		}
		mu.Unlock()
		got = append(got, m.Method)
	}
	<-ended
	if want := []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if want := []bool{true, false, true}; !slices.Equal(fresh, want) {
		t.Errorf("fresh: got %v, want %v", fresh, want)
	}
}

// orderPipeline holds the first message until release is closed, and
// notes the methods it sees.
type orderPipeline struct {
	mu      sync.Mutex
	seen    []string
	held    chan struct{}
	release chan struct{}
}

func (o *orderPipeline) Handle(_ Side, m *Message, forward Forward) (*Message, string, bool, error) {
	o.mu.Lock()
	o.seen = append(o.seen, m.Method)
	first := len(o.seen) == 1
	o.mu.Unlock()
	if first {
		close(o.held)
		<-o.release
	}
	return forward(m), "", false, nil
}

// updates returns n session/updates, numbered, one per line.
func updates(n int) []byte {
	var b []byte
	for i := range n {
		b = fmt.Appendf(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"n":%d}}}`+"\n", i)
	}
	return b
}

// While the plugs see a message, the lines read with it are framed and
// checked, at most maxAhead of them, and still met in the order they came
// (M6); the last one tells that nothing more has arrived.
func TestM6_LinesReadAlreadyAreCheckedAheadInOrder(t *testing.T) {
	n := maxAhead + 40
	a := newAhead(NewReader(bytes.NewReader(updates(n)), 0), false)
	go a.run(log.New(io.Discard), ToClient)
	defer a.stop()
	first, drained, err := a.next()
	if err != nil || drained {
		t.Fatalf("the first message: drained %v, err %v", drained, err)
	}
	// The handler holds the first message: the others are read ahead, as
	// many as the bound lets.
	queued := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queue) - a.head
	}
	testsupport.Eventually(t, "the lines read ahead", func() bool { return queued() >= maxAhead })
	if q := queued(); q != maxAhead {
		t.Fatalf("%d messages read ahead, past the bound of %d", q, maxAhead)
	}
	msgs := []*Message{first}
	for i := 1; i < n; i++ {
		m, drained, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		if drained != (i == n-1) {
			t.Fatalf("message %d of %d: drained %v", i, n, drained)
		}
		msgs = append(msgs, m)
	}
	for i, m := range msgs {
		if want := fmt.Sprintf(`"n":%d}`, i); !bytes.Contains(m.Raw, []byte(want)) {
			t.Fatalf("message %d out of order: %s", i, m.Raw)
		}
	}
	if _, _, err := a.next(); err != io.EOF {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
}

// Through the proxy, messages read ahead while the plugs hold one meet
// the plugs and the client in the order they came (M6).
func TestM6_MessagesReadAheadKeepTheirOrder(t *testing.T) {
	const n = 100
	pl := &orderPipeline{held: make(chan struct{}), release: make(chan struct{})}
	out := &testsupport.Buffer{}
	p := &Proxy{ToClient: NewWriter(out), ToAgent: NewWriter(io.Discard), Pipeline: pl, Log: log.New(io.Discard)}
	p.init()
	done := make(chan error, 1)
	go func() { done <- p.read(ToClient, NewReader(bytes.NewReader(updates(n)), 0)) }()
	<-pl.held
	close(pl.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := p.ToClient.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(pl.seen) != n {
		t.Fatalf("the plugs saw %d messages of %d", len(pl.seen), n)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != n {
		t.Fatalf("forwarded %d messages of %d", len(lines), n)
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`"n":%d}`, i); !strings.Contains(l, want) {
			t.Fatalf("message %d out of order: %s", i, l)
		}
	}
}

// NextRead returns what was read already and never reads: a line not
// fully arrived is left for Next.
func TestNextReadNeverReadsTheStream(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	go func() {
		fmt.Fprint(pw, `{"jsonrpc":"2.0","method":"a"}`+"\n"+`{"jsonrpc":"2.0","method":"b"}`+"\n"+`{"jsonrpc":"2.0",`)
	}()
	m, err := r.Next()
	if err != nil || m.Method != "a" {
		t.Fatalf("Next: %v, %v", m, err)
	}
	if !r.Buffered() {
		// One write of the pipe is one read.
		t.Fatal("the Reader holds nothing after the first line")
	}
	m, ok, err := r.NextRead()
	if !ok || err != nil || m.Method != "b" {
		t.Fatalf("NextRead: %v, %v, %v; want b", m, ok, err)
	}
	if _, ok, err := r.NextRead(); ok || err != nil {
		t.Fatalf("NextRead of a line not fully arrived: ok %v, err %v", ok, err)
	}
	go func() {
		fmt.Fprint(pw, `"method":"c"}`+"\n")
		pw.Close()
	}()
	if m, err := r.Next(); err != nil || m.Method != "c" {
		t.Fatalf("Next after NextRead: %v, %v; want c", m, err)
	}
}

// TestM2_AMessageQueuedForCheckingKeepsNeitherItsBlockNorItsBytes: the
// params check runs long after a message went on, so what waits for it is
// a copy: the message's block is read into again meanwhile, and the check
// still sees the params as they came.
func TestM2_AMessageQueuedForCheckingKeepsNeitherItsBlockNorItsBytes(t *testing.T) {
	p := &Proxy{checks: make(chan checkItem, checkQueue)}
	r := smallBlocks(`{"method":"session/update","params":{"n":%d}}` + "\n")
	var want []string
	queuedIn := map[*block]bool{}
	reused := false
	each(t, r, func(m *Message) {
		if queuedIn[m.blk] && len(want) == checkQueue {
			reused = true
		}
		if len(want) < checkQueue {
			p.check(m)
			want = append(want, string(m.Params))
			queuedIn[m.blk] = true
		}
		m.Release()
	})
	if !reused {
		t.Fatal("no block of a queued message was read into again: the test shows nothing")
	}
	for i, w := range want {
		c := <-p.checks
		if c.method != "session/update" || string(c.params) != w {
			t.Fatalf("check %d: %s %s, want session/update %s", i, c.method, c.params, w)
		}
	}
}

// TestM2_ChecksWaitingHoldAtMostMaxCheckBytes: params larger than the bound
// are queued alone, and nothing joins them until they are checked.
func TestM2_ChecksWaitingHoldAtMostMaxCheckBytes(t *testing.T) {
	p := &Proxy{checks: make(chan checkItem, checkQueue)}
	big := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", maxCheckBytes) + `"}}`))
	small := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{}}`))
	p.check(big)
	p.check(small)
	if n := len(p.checks); n != 1 {
		t.Fatalf("%d checks queued, want the large one alone", n)
	}
	if got := p.checkBytes.Load(); got != int64(len(big.Params)) {
		t.Fatalf("checkBytes = %d, want %d", got, len(big.Params))
	}
}

// freeingPipeline forwards a notification, tells it free and fails, as a
// pipeline does whose handler failed after next() without reaching
// anything of its ctx that outlives the call; it notes the message's holds
// as it returns.
type freeingPipeline struct {
	m     *Message
	holds int32
}

func (f *freeingPipeline) Handle(_ Side, m *Message, forward Forward) (*Message, string, bool, error) {
	forward(m)
	f.m, f.holds = m, m.blk.holds.Load()
	return nil, "", m.Kind == Notification, errors.New("the handler failed after next()")
}

// TestAMessageThePipelineFreesIsReleasedOnceTheProxyIsDone: the
// proxy releases a message that the pipeline tells free after its last use
// of it (the failure's report reads its method and kind), not before: once
// released, its block and the Message itself are the Reader's again.
func TestAMessageThePipelineFreesIsReleasedOnceTheProxyIsDone(t *testing.T) {
	f := &freeingPipeline{}
	var failures int
	p := &Proxy{
		FromAgent: NewReader(strings.NewReader(string(NewNotification("session/update", []byte(`{"sessionId":"s"}`)))+"\n"), 0),
		ToClient:  NewWriter(io.Discard), ToAgent: NewWriter(io.Discard),
		Pipeline: f, Log: log.New(io.Discard),
		OnFailure: func(error) {
			failures++
			if n := f.m.blk.holds.Load(); n != f.holds {
				t.Errorf("the message has %d holds while the proxy reports its failure, %d when the pipeline returned", n, f.holds)
			}
		},
	}
	p.init()
	if err := p.read(ToClient, p.FromAgent); err != nil {
		t.Fatal(err)
	}
	if failures != 1 {
		t.Fatalf("%d failures reported, want 1", failures)
	}
	if n := f.m.blk.holds.Load(); n >= f.holds {
		t.Fatalf("the message freed has %d holds after the proxy is done with it, %d before", n, f.holds)
	}
}

// failingPipeline passes every message on, and fails on the one whose
// params hold "two", as a plug's fail() in on_message does.
type failingPipeline struct{}

func (failingPipeline) Handle(_ Side, m *Message, forward Forward) (*Message, string, bool, error) {
	if bytes.Contains(m.Params, []byte(`"two"`)) {
		return nil, "", false, errors.New("p.star:4:9: plug test/p: on_message: saw two")
	}
	return forward(m), "", false, nil
}

// TestM4_APlugFailingMidTurnCutsTheClientsStreamThere: when a plug fails
// on the agent's second chunk of a turn, the client gets the first chunk,
// then the answer to its prompt, an error naming the plug and its
// message; nothing of what the agent sent after (the third chunk, its own
// end_turn) reaches it, whichever goroutine gets there first, 200 times
// in a row.
func TestM4_APlugFailingMidTurnCutsTheClientsStreamThere(t *testing.T) {
	chunk := func(text string) string {
		return string(NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, text))) + "\n"
	}
	want := chunk("one") + string(NewErrorResponse([]byte("1"), InternalError, "a plug failed: p.star:4:9: plug test/p: on_message: saw two", nil)) + "\n"
	for i := range 200 {
		clientR, toProxy, _ := os.Pipe()
		fromProxy, clientW, _ := os.Pipe()
		agentR, toAgent, _ := os.Pipe()
		fromAgent, agentW, _ := os.Pipe()
		failed := make(chan struct{})
		p := &Proxy{
			FromClient: NewReader(clientR, 0), ToClient: NewWriter(clientW),
			FromAgent: NewReader(fromAgent, 0), ToAgent: NewWriter(toAgent),
			Pipeline:  failingPipeline{},
			Log:       log.New(io.Discard),
			OnFailure: func(error) { close(failed) },
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		go func() {
			// The agent: the whole turn at once on the prompt, and its
			// output ends once the run is stopped for the failure.
			if _, err := bufio.NewReader(agentR).ReadBytes('\n'); err != nil {
				return
			}
			io.WriteString(agentW, chunk("one")+chunk("two")+chunk("three")+string(NewResponse([]byte("1"), []byte(`{"stopReason":"end_turn"}`)))+"\n")
			<-failed
			agentW.Close()
		}()
		fmt.Fprintf(toProxy, "%s\n", NewRequest([]byte("1"), "session/prompt", []byte(`{"sessionId":"s","prompt":[]}`)))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		clientW.Close()
		got, err := io.ReadAll(fromProxy)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("run %d: the client got\n%s\nwant\n%s", i+1, got, want)
		}
		for _, f := range []*os.File{clientR, toProxy, fromProxy, agentR, toAgent, fromAgent} {
			f.Close()
		}
	}
}

// clientRecorder counts the messages recorded toward the client.
type clientRecorder struct{ n atomic.Int32 }

func (r *clientRecorder) Record(side Side, _ *Message, _ string) {
	if side == ToClient {
		r.n.Add(1)
	}
}

// TestM4_ThePlugsFailureIsReportedBeforeTheClientHearsOfIt: OnFailure
// hears of a plug's failure before the client's open request gets its
// answer, so that a client that stops the run on that answer (as `blaise-agent
// test` stops it idle once its script is played) finds the failure
// reported first; the answer still goes out before Run returns.
func TestM4_ThePlugsFailureIsReportedBeforeTheClientHearsOfIt(t *testing.T) {
	clientR, toProxy, _ := os.Pipe()
	fromProxy, clientW, _ := os.Pipe()
	agentR, toAgent, _ := os.Pipe()
	fromAgent, agentW, _ := os.Pipe()
	rec := &clientRecorder{}
	answered := make(chan int32, 1)
	p := &Proxy{
		FromClient: NewReader(clientR, 0), ToClient: NewWriter(clientW),
		FromAgent: NewReader(fromAgent, 0), ToAgent: NewWriter(toAgent),
		Pipeline: failingPipeline{},
		Recorder: rec,
		Log:      log.New(io.Discard),
		OnFailure: func(error) {
			answered <- rec.n.Load()
			// The run stops for the failure: the agent's output ends.
			agentW.Close()
		},
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	fmt.Fprintf(toProxy, "%s\n", NewRequest([]byte("1"), "session/prompt", []byte(`{"sessionId":"s","prompt":[{"type":"text","text":"two"}]}`)))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := <-answered; n != 0 {
		t.Fatalf("the client had %d messages when the failure was reported, want none", n)
	}
	clientW.Close()
	got, err := io.ReadAll(fromProxy)
	if err != nil {
		t.Fatal(err)
	}
	want := string(NewErrorResponse([]byte("1"), InternalError, "a plug failed: p.star:4:9: plug test/p: on_message: saw two", nil)) + "\n"
	if string(got) != want {
		t.Fatalf("the client got\n%s\nwant\n%s", got, want)
	}
	for _, f := range []*os.File{clientR, toProxy, fromProxy, agentR, toAgent, fromAgent} {
		f.Close()
	}
}
