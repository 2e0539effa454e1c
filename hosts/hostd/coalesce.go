package hostd

import (
	"errors"
	"io"
	"sync"
	"time"
)

// coalescingLimit is how many bytes a coalescingWriter holds before Write
// waits for them to be written.
const coalescingLimit = 256 << 10

// coalescingWriter gathers small writes and writes them to w from a
// goroutine of its own, many at once. yamux writes every frame as a header
// and a body; on a pipe that is two system calls per ACP message, which
// this turns into one call for all the frames queued meanwhile.
type coalescingWriter struct {
	w io.Writer

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // waiting to be written
	spare   []byte // the buffer being written, reused
	err     error  // the first error of w, returned by every later Write
	closed  bool
	writing bool          // a write to w is in progress
	done    chan struct{} // closed when flush returns
}

func newCoalescingWriter(w io.Writer) *coalescingWriter {
	c := &coalescingWriter{w: w, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	// Close waits for it (done), drainTimeout at most.
	go c.flush()
	return c
}

// directWrite is the size from which a write goes to w itself, in turn,
// rather than being copied into the queue.
const directWrite = 32 << 10

// Write queues p; it waits while more than coalescingLimit bytes are
// queued. A large p is written to w directly once the queue is empty.
func (c *coalescingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	large := len(p) >= directWrite
	for c.err == nil && !c.closed && (len(c.buf) > coalescingLimit || large && (len(c.buf) > 0 || c.writing)) {
		c.cond.Wait()
	}
	switch {
	case c.err != nil:
		return 0, c.err
	case c.closed:
		return 0, io.ErrClosedPipe
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

// flush writes what is queued until the writer is closed or w fails.
func (c *coalescingWriter) flush() {
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

// drainTimeout bounds how long Close waits for what is queued: a peer that
// stopped reading would otherwise hold it, and w's closer, for ever.
const drainTimeout = 5 * time.Second

// Close refuses further writes and waits until what is queued has been
// written, w failed, or drainTimeout passed; it does not close w.
func (c *coalescingWriter) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	return nil
}

// closers closes each of its closers, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
