package runnerproto

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn records each write it gets, and blocks them until released.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
	gate   chan struct{}
}

func (c *countingConn) Write(p []byte) (int, error) {
	<-c.gate
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *countingConn) Close() error                     { return nil }
func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

// TestCoalesceGathersWritesInOrder: writes made while an earlier one goes
// out leave together, in order; Close sends what is still queued.
func TestCoalesceGathersWritesInOrder(t *testing.T) {
	under := &countingConn{gate: make(chan struct{})}
	c := Coalesce(under)
	if _, err := io.WriteString(c, "a"); err != nil { // taken by the flusher, held at the gate
		t.Fatal(err)
	}
	for _, s := range []string{"b", "c", "d"} {
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
	}
	close(under.gate)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	under.mu.Lock()
	defer under.mu.Unlock()
	var all []byte
	for _, w := range under.writes {
		all = append(all, w...)
	}
	if string(all) != "abcd" {
		t.Fatalf("the connection got %q, want abcd in order", all)
	}
	if len(under.writes) > 2 {
		t.Fatalf("%d writes for 4 small ones made while one was out, want at most 2: %q", len(under.writes), under.writes)
	}
	if _, err := io.WriteString(c, "e"); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}

// TestCoalesceReportsAFailedConnection: once a write of the connection
// fails, the writes after it fail too.
func TestCoalesceReportsAFailedConnection(t *testing.T) {
	a, b := net.Pipe()
	c := Coalesce(a)
	b.Close()
	if _, err := io.WriteString(c, "x"); err != nil {
		t.Fatalf("the first write is queued: %v", err)
	}
	for i := 0; ; i++ {
		if _, err := io.WriteString(c, "y"); err != nil {
			break
		}
		if i > 1e6 {
			t.Fatal("writes to a closed connection never fail")
		}
	}
	c.Close()
}
