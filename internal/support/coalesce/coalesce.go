// Package coalesce gathers small writes and writes them from a goroutine
// of its own, many at once. yamux writes every frame as a header and a
// body: on a pipe that is two system calls per ACP message, over a
// WebSocket two messages; gathered, a burst of small frames costs one.
package coalesce

import (
	"io"
	"sync"
	"time"
)

// Grace bounds how long Close waits for what is queued: a peer that
// stopped reading would otherwise hold it, and w's closer, for ever.
const Grace = 5 * time.Second

// Options tune a Writer.
type Options struct {
	// Limit is how many bytes may be queued before Write waits for them
	// to be written: a slow peer slows its writers down.
	Limit int
	// Direct, when not 0, is the size from which a write goes to w
	// itself, in turn, once the queue is empty, rather than being copied
	// into it.
	Direct int
	// Closed is what Write returns after Close.
	Closed error
}

// Writer queues what is written to it and writes it to w: what is written
// while an earlier write is still going out leaves with the next one, in
// one write. A write returns once its bytes are queued; the first error
// of w is returned by every write after it.
type Writer struct {
	w    io.Writer
	opts Options

	mu      sync.Mutex
	cond    *sync.Cond    // buf, writing, err or closed changed
	buf     []byte        // waiting to be written
	spare   []byte        // the buffer being written, reused
	err     error         // the first error of w
	closed  bool          // Close was called
	writing bool          // a write to w is in progress
	done    chan struct{} // closed when flush returns
}

// New returns a Writer to w and starts its goroutine; Close stops it.
func New(w io.Writer, opts Options) *Writer {
	c := &Writer{w: w, opts: opts, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.flush()
	return c
}

// Write queues p; it waits while more than Limit bytes are queued. A
// large p (Options.Direct) is written to w directly once the queue is
// empty.
func (c *Writer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	large := c.opts.Direct > 0 && len(p) >= c.opts.Direct
	for c.err == nil && !c.closed && (len(c.buf) > c.opts.Limit || large && (len(c.buf) > 0 || c.writing)) {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, c.opts.Closed
	case large:
		c.writing = true
		c.mu.Unlock()
		n, err := c.w.Write(p)
		c.mu.Lock()
		c.writing = false
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
		return n, err
	}
	c.buf = append(c.buf, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// flush writes what is queued until the writer is closed and drained, or
// w fails.
func (c *Writer) flush() {
	defer close(c.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for (len(c.buf) == 0 || c.writing) && !c.closed && c.err == nil {
			c.cond.Wait()
		}
		if c.err != nil || len(c.buf) == 0 && c.closed {
			return // failed, or closed and drained
		}
		if c.writing {
			c.cond.Wait() // closed while a direct write runs: let it finish
			continue
		}
		out := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.writing = true
		c.mu.Unlock()
		_, err := c.w.Write(out)
		c.mu.Lock()
		c.writing = false
		c.spare = out
		if err != nil {
			c.err = err
			c.buf = nil
			c.cond.Broadcast()
			return
		}
		c.cond.Broadcast()
	}
}

// Close refuses further writes and waits until what is queued has been
// written, w failed, or Grace passed; it does not close w.
func (c *Writer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	t := time.NewTimer(Grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	return nil
}
