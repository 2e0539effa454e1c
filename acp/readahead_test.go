package acp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/charmbracelet/log"
	"golang.org/x/sys/unix"
)

// fillNow reads what a pipe holds and returns at once when it holds
// nothing; of a stream without a descriptor, or one whose reads would
// wait, it reads nothing.
func TestIssue12_FillNowReadsWhatAPipeHoldsWithoutWaiting(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := NewReader(pr, 0)
	if r.now == nil {
		t.Fatal("no read that does not wait for a pipe of os.Pipe")
	}
	if r.fillNow() {
		t.Fatal("fillNow of an empty pipe read something")
	}
	fmt.Fprint(pw, `{"jsonrpc":"2.0","method":"a"}`+"\n")
	if !r.fillNow() {
		t.Fatal("fillNow did not read the line the pipe holds")
	}
	if m, ok, err := r.NextRead(); !ok || err != nil || m.Method != "a" {
		t.Fatalf("NextRead after fillNow: %v %v %v", m, ok, err)
	}

	if NewReader(strings.NewReader("x"), 0).now != nil {
		t.Error("a read that does not wait for a strings.Reader")
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	blocking := os.NewFile(uintptr(fds[0]), "blocking")
	defer blocking.Close()
	defer unix.Close(fds[1])
	if NewReader(blocking, 0).now != nil {
		t.Error("a read that does not wait for a descriptor in blocking mode: it would wait")
	}
}

// While a plug holds a message, what the stream holds past the read that
// brought it is read and checked ahead too, not only the lines read with
// it (issue 12); they meet the plugs in order (M6).
func TestIssue12_M6_ThePlugsHoldingAMessageLetTheStreamBeReadAhead(t *testing.T) {
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
	r.now = readNow(pr)
	a := &ahead{r: r, wake: make(chan struct{}, 1), readsNow: true}
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

// A notification's block goes back to its Reader once the plugs are done
// with it and the client's stream wrote it, even while CheckParams checks
// it beside them: the block of the stream is read into again, and every
// byte still arrives.
func TestIssue12_ANotificationsBlockIsReadIntoAgainAfterThePlugs(t *testing.T) {
	agent, agentW, _ := os.Pipe()
	fromProxy, clientW, _ := os.Pipe()
	var want bytes.Buffer
	go func() {
		w := bufio.NewWriter(agentW)
		for i := range 5000 {
			line := string(NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, strings.Repeat("y", i%700))))
			want.WriteString(line + "\n")
			w.WriteString(line + "\n")
		}
		w.Flush()
		agentW.Close()
	}()
	pl := &orderPipeline{held: make(chan struct{}), release: make(chan struct{})}
	close(pl.release)
	p := &Proxy{
		FromAgent: newReaderSize(agent, 0, 64<<10), ToClient: NewWriter(clientW), ToAgent: NewWriter(io.Discard),
		Pipeline: pl, CheckParams: true, Log: log.New(io.Discard),
	}
	p.init()
	p.checks = make(chan *Message, checkQueue)
	go p.checker(p.checks)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(fromProxy); got <- b }()
	if err := p.read(ToClient, p.FromAgent); err != nil {
		t.Fatal(err)
	}
	if err := p.ToClient.Flush(); err != nil {
		t.Fatal(err)
	}
	clientW.Close()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the client got %d bytes that differ from the %d sent", len(b), want.Len())
	}
	// The checker lets go of the last ones in its own time.
	testsupport.Eventually(t, "a block of the agent's stream to come back to be read into again", func() bool { return len(p.FromAgent.free) > 0 })
}
