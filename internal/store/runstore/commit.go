package runstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
)

// committer commits, answers and keeps the appends that Serve reads in
// order, on a goroutine of its own: it takes every append given to it
// since its last commit, up to maxBatch bytes, and commits them with one
// write. While it works, Serve touches none of the Server's state but
// the buffers of its reads; any call but an append in order waits for it
// to be idle (drain).
type committer struct {
	s *Server
	// ctx is Serve's without its end: stop commits what is left.
	ctx   context.Context
	w     *bufio.Writer
	mu    sync.Mutex
	cond  sync.Cond // the queue or busy changed
	queue []*request
	busy  bool  // a batch is being committed
	err   error // the first error: answering failed, or the calls broke the protocol
	// broken: the calls broke the protocol (ErrBroken), and nothing more
	// is applied. An append given after answering failed is still
	// committed: its messages were forwarded, and the run, which sends it
	// again on its next stream, must find it applied.
	broken bool
	done   bool // stop was called
	ended  chan struct{}
}

func (s *Server) startCommitter(ctx context.Context, w *bufio.Writer) *committer {
	c := &committer{s: s, ctx: context.WithoutCancel(ctx), w: w, ended: make(chan struct{})}
	c.cond.L = &c.mu
	// stop waits for it (ended).
	go c.run()
	return c
}

func (c *committer) run() {
	defer close(c.ended)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.queue) == 0 && !c.done {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			return
		}
		n, size := 0, 0
		for n < len(c.queue) && size < maxBatch {
			size += len(c.queue[n].Data)
			n++
		}
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		if c.broken {
			continue
		}
		c.busy = true
		c.mu.Unlock()
		err := c.s.commit(c.ctx, c.w, batch)
		c.mu.Lock()
		c.busy = false
		if err != nil && c.err == nil {
			c.err = err
		}
		c.broken = c.broken || errors.Is(err, ErrBroken)
		c.cond.Broadcast()
	}
}

// add gives the committer an append, and returns the error of an
// earlier batch, if any: the append is committed all the same.
func (c *committer) add(req *request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, req)
	c.cond.Broadcast()
	return c.err
}

// drain waits until every append given is committed and answered, or
// the calls broke the protocol.
func (c *committer) drain() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for (len(c.queue) > 0 || c.busy) && !c.broken {
		c.cond.Wait()
	}
	return c.err
}

// stop commits what is left and ends the committer's goroutine.
func (c *committer) stop() {
	c.mu.Lock()
	c.done = true
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.ended
}

// commit applies a batch of appends in order and answers them.
func (s *Server) commit(ctx context.Context, w *bufio.Writer, batch []*request) error {
	for _, req := range batch {
		s.forget(req.Answered)
	}
	if len(s.kept)+len(batch) > maxKept {
		last := batch[len(batch)-1]
		return fmt.Errorf("%w: call %d: the answers of %d calls are not read (answered %d): at most %d", ErrBroken, last.ID, len(s.kept), last.Answered, maxKept)
	}
	return s.answerBatch(w, batch, s.appendBatch(ctx, batch))
}
