package runnerproto

import (
	"net"
	"sync"
	"time"
)

// Coalesce returns conn with its writes gathered: what is written while
// an earlier write is still going out leaves with the next one, in one
// write. Over a WebSocket each write of conn is a message of its own, and
// yamux writes a frame's header and its body apart; gathered, a burst of
// small frames costs one message. A write returns once its bytes are
// queued (at most maxQueued: a slow peer slows its writers down); an error
// of the connection is returned by the writes after it. With raw, the
// connection under conn, each gathered write leaves raw corked: in one
// system call.
func Coalesce(conn net.Conn, raw *Corked) net.Conn {
	c := &coalesced{Conn: conn, raw: raw, flushed: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.flush() // Close waits for it
	return c
}

const maxQueued = 1 << 20

type coalesced struct {
	net.Conn
	raw    *Corked
	mu     sync.Mutex
	cond   *sync.Cond // queued, err or closed changed
	queued []byte
	spare  []byte // the buffer last written, reused
	err    error
	closed bool
	// flushed is closed when flush has returned: on Close, the queue sent.
	flushed chan struct{}
}

func (c *coalesced) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queued) >= maxQueued && c.err == nil && !c.closed {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, net.ErrClosed
	}
	c.queued = append(c.queued, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// flush writes what is queued, all of it at once, until the connection
// fails or is closed.
func (c *coalesced) flush() {
	defer close(c.flushed)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.queued) == 0 && !c.closed {
			c.cond.Wait()
		}
		if len(c.queued) == 0 {
			return // closed
		}
		out := c.queued
		c.queued, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		err := c.write(out)
		c.mu.Lock()
		c.spare = out
		c.cond.Broadcast() // room for writers
		if err != nil {
			c.err = err
			return
		}
	}
}

func (c *coalesced) write(out []byte) error {
	if c.raw == nil {
		_, err := c.Conn.Write(out)
		return err
	}
	c.raw.Cork()
	_, err := c.Conn.Write(out)
	if uerr := c.raw.Uncork(); err == nil {
		err = uerr
	}
	return err
}

// closeGrace bounds how long Close waits for what is queued to go out.
const closeGrace = 5 * time.Second

// Close sends what is queued (a last frame, a refusal), then closes; it
// returns once the flusher has ended.
func (c *coalesced) Close() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.flushed
	return c.Conn.Close()
}
