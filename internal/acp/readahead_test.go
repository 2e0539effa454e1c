package acp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// While a plug holds a message, what the stream holds past the read that
// brought it is read and checked ahead too, not only the lines read with it;
// they meet the plugs in order (M6).
func TestM6_ThePlugsHoldingAMessageLetTheStreamBeReadAhead(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pl := &orderPipeline{held: make(chan struct{}), release: make(chan struct{})}
	out := &testsupport.Buffer{}
	p := &Proxy{ToClient: NewWriter(out), ToAgent: NewWriter(io.Discard), Pipeline: pl, Log: log.New(io.Discard)}
	p.init()
	// Blocks of 512 bytes: the handler's read takes a few lines, the pipe
	// keeps the others.
	r := newReaderSize(pr, 0, 512)
	r.now, r.wait = readNow(pr)
	a := newAhead(r, true)
	go a.run(p.Log, ToClient)
	defer a.stop()
	all := updates(50)
	if _, err := pw.Write(all); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	first, _, err := a.next()
	if err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan struct{})
	go func() { p.receive(ToClient, first); close(firstDone) }()
	<-pl.held
	testsupport.Eventually(t, "the other 49 messages read ahead", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queue)-a.head == 49
	})
	close(pl.release)
	<-firstDone
	for range 49 {
		m, _, err := a.next()
		if err != nil {
			t.Fatal(err)
		}
		p.receive(ToClient, m)
	}
	if err := p.ToClient.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(all) {
		t.Fatalf("forwarded\n%s\nwant\n%s", got, all)
	}
}

// backHolder holds each notification until the next one comes, as a
// plug that holds back a chunk does (docs/messages.md): the message it
// keeps must keep its bytes.
type backHolder struct {
	held        *Message
	heldForward Forward
}

func (h *backHolder) Handle(_ Side, m *Message, forward Forward) (*Message, string, bool, error) {
	if h.held != nil {
		h.heldForward(h.held)
	}
	h.held, h.heldForward = m, forward
	return nil, "", false, nil
}

// A notification the plugs hold past its handler keeps its bytes while the
// stream is read into other blocks: a message the plugs saw is never
// released.
func TestANotificationHeldByThePlugsKeepsItsBytes(t *testing.T) {
	agent, agentW, _ := os.Pipe()
	fromProxy, clientW, _ := os.Pipe()
	var lines []string
	for i := range 3000 {
		lines = append(lines, string(NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"i":%d,"text":%q}}`, i, strings.Repeat("y", i%700)))))
	}
	go func() {
		w := bufio.NewWriter(agentW)
		for _, l := range lines {
			w.WriteString(l + "\n")
		}
		w.Flush()
		agentW.Close()
	}()
	p := &Proxy{
		FromAgent: newReaderSize(agent, 0, 4<<10), ToClient: NewWriter(clientW), ToAgent: NewWriter(io.Discard),
		Pipeline: &backHolder{}, Log: log.New(io.Discard),
	}
	p.init()
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(fromProxy); got <- b }()
	if err := p.read(ToClient, p.FromAgent); err != nil {
		t.Fatal(err)
	}
	if err := p.ToClient.Flush(); err != nil {
		t.Fatal(err)
	}
	clientW.Close()
	// The last one is still held.
	want := strings.Join(lines[:len(lines)-1], "\n") + "\n"
	if b := <-got; string(b) != want {
		t.Fatalf("the client got %d bytes that differ from the %d of the messages released", len(b), len(want))
	}
}

// While the goroutine ahead tries the stream, the goroutine handling the
// messages takes those it queued already, without waiting for that read;
// once nothing is queued, it waits for the read ahead to end, then reads
// the stream itself (throughput with plugs).
func TestM6_MessagesReadAheadAreTakenWhileTheStreamIsTried(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	r := newReaderSize(pr, 0, 4<<10)
	trying, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.now = func([]byte) (int, bool) {
		once.Do(func() { close(trying) })
		<-release
		return 0, false
	}
	a := newAhead(r, true)
	go a.run(log.New(io.Discard), ToClient)
	defer a.stop()
	releaseNow := sync.OnceFunc(func() { close(release) })
	defer releaseNow() // before stop, which waits for the read ahead
	if _, err := pw.Write(updates(3)); err != nil {
		t.Fatal(err)
	}
	next := func() <-chan *Message {
		got := make(chan *Message, 1)
		go func() {
			m, _, err := a.next()
			if err != nil && !errors.Is(err, io.EOF) {
				t.Error(err)
			}
			got <- m
		}()
		return got
	}
	if m := <-next(); !bytes.Contains(m.Raw, []byte(`"n":0`)) {
		t.Fatalf("first: %s", m.Raw)
	}
	<-trying // the other two are queued; the goroutine ahead is in the stream
	for i := 1; i <= 2; i++ {
		got := next()
		var m *Message
		testsupport.Eventually(t, fmt.Sprintf("update %d is taken while the stream is tried", i), func() bool {
			select {
			case m = <-got:
				return true
			default:
				return false
			}
		})
		if want := fmt.Sprintf(`"n":%d`, i); !bytes.Contains(m.Raw, []byte(want)) {
			t.Fatalf("update %d: %s", i, m.Raw)
		}
	}
	last := next()
	releaseNow()
	pw.Close()
	if m := <-last; m != nil {
		t.Fatalf("after the stream's end: %s", m.Raw)
	}
}
