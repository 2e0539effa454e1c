package acp

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

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
