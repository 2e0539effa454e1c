package runnerproto

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
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
	c := Coalesce(under, nil)
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
	c := Coalesce(a, nil)
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

// writeCounter counts the writes of the connection it wraps.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// TestARunnersMessageLeavesInOneWrite: a WebSocket client masks a
// message in 4 KiB pieces and writes each apart; through a corked
// connection, a runner's 64 KiB message leaves in one write.
func TestARunnersMessageLeavesInOneWrite(t *testing.T) {
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(-1)
		_, data, err := ws.Read(r.Context())
		if err == nil {
			got <- data
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}))
	defer srv.Close()
	var writes atomic.Int64
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return writeCounter{c, &writes}, err
	}}
	hc, dialed := CorkingClient(&http.Client{Transport: base})
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	c := Coalesce(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), dialed())
	defer c.Close()
	msg := bytes.Repeat([]byte("x"), 64<<10)
	before := writes.Load()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if data := <-got; !bytes.Equal(data, msg) {
		t.Fatalf("the server got %d bytes, want the %d written", len(data), len(msg))
	}
	if n := writes.Load() - before; n != 1 {
		t.Fatalf("the message left in %d writes, want 1", n)
	}
}
