package acp

import (
	"errors"
	"io"
	"sync"

	"github.com/charmbracelet/log"
)

// ahead is a Reader shared by the goroutine that handles its messages and
// one that frames and checks, meanwhile, the lines read already, and reads
// what the stream holds without waiting for more.
type ahead struct {
	mu sync.Mutex
	// ready tells next, waiting on mu, that the goroutine ahead queued a
	// message or let go of r.
	ready  sync.Cond
	r      *Reader
	queue  []*Message // read ahead, in order, from head on
	head   int
	closed bool
	// busy: the goroutine ahead is reading r, without mu, so that the
	// goroutine handling messages takes those queued meanwhile.
	busy bool
	wake chan struct{} // there are lines to read ahead
	ran  chan struct{} // closed when run has returned
	// readsNow: the stream is read ahead too, not only its lines read
	// already, for plugs: while they see a message, the next ones arrive.
	// With 5 plugs the rate is about 11% higher than without it
	// (docs/performance.md, what each optimisation pays).
	readsNow bool
}

// newAhead returns the ahead of r; readsNow: see ahead.readsNow.
func newAhead(r *Reader, readsNow bool) *ahead {
	a := &ahead{r: r, wake: make(chan struct{}, 1), ran: make(chan struct{}), readsNow: readsNow}
	a.ready.L = &a.mu
	return a
}

// maxAhead bounds the messages read ahead.
const maxAhead = 256

// next returns the next message, read ahead or read now, and whether
// nothing more has arrived.
func (a *ahead) next() (*Message, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.head == len(a.queue) && a.busy {
		a.ready.Wait()
	}
	var m *Message
	if a.head < len(a.queue) {
		m = a.queue[a.head]
		a.queue[a.head] = nil
		if a.head++; a.head == len(a.queue) {
			a.queue, a.head = a.queue[:0], 0
		}
	} else {
		var err error
		if m, err = a.r.Next(); err != nil {
			return nil, false, err
		}
	}
	// While the goroutine ahead reads, it has lines to frame or a
	// stream to try: more is likely to come (WithNext waits batchDelay
	// at most when it does not).
	more, queued := a.busy || a.r.Buffered(), len(a.queue)-a.head
	// With nothing buffered, the stream may hold more that a read that
	// does not wait takes (Reader.fillNow).
	if (more || a.readsNow) && queued < maxAhead/2 {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
	return m, !more && queued == 0, nil
}

// run reads ahead, when woken, the lines read already and those the stream
// holds.
func (a *ahead) run(logger *log.Logger, side Side) {
	defer close(a.ran)
	// Declared here, where errors.As makes it escape: not once per line.
	var lineErr *LineError
	for range a.wake {
		for {
			a.mu.Lock()
			if a.closed || len(a.queue)-a.head >= maxAhead {
				a.mu.Unlock()
				break
			}
			a.busy = true
			a.mu.Unlock()
			m, ok, err := a.r.NextRead()
			for !ok && err == nil && a.readsNow && a.r.fillNow() {
				m, ok, err = a.r.NextRead()
			}
			a.mu.Lock()
			a.busy = false
			a.ready.Broadcast()
			switch {
			case !ok:
			case err == nil:
				if len(a.queue) == cap(a.queue) && a.head > 0 {
					// Moved down, so that the array is reused.
					n := copy(a.queue, a.queue[a.head:])
					clear(a.queue[n:])
					a.queue, a.head = a.queue[:n], 0
				}
				a.queue = append(a.queue, m)
			case errors.As(err, &lineErr):
				logger.Warn("skipped a bad line", "from", side.sender(), "err", lineErr) // M7
			default:
				// The end of the stream, or its failure: next meets it
				// again.
				ok = false
			}
			a.mu.Unlock()
			if !ok {
				break
			}
		}
	}
}

// stop ends run, and waits for it: it reads only what needs no wait.
func (a *ahead) stop() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	close(a.wake)
	<-a.ran
}

// ReadMessages reads rd until it ends, sending its messages on the returned
// channel, which is closed at the end. Bad lines are logged and skipped (M7).
//
// seen, when not nil, sees each message on the reading goroutine before it
// is sent, sparing a watcher a goroutine and a hop of its own, and returns
// whether it is sent: one it keeps back is its to release. fresh tells
// that the message ended in bytes that a read brought for it, not in bytes
// that came with the message before. At the end, seen sees nil.
func ReadMessages(rd *Reader, logger *log.Logger, seen func(m *Message, fresh bool) (send bool)) <-chan *Message {
	ch := make(chan *Message, 64)
	// Ends with rd's stream; its reader owns that stream.
	go func() {
		defer close(ch)
		if seen != nil {
			defer seen(nil, false)
		}
		for {
			reads := rd.reads
			m, err := rd.Next()
			if err != nil {
				// Declared here, where errors.As makes it escape: not once
				// per message.
				var lineErr *LineError
				if errors.As(err, &lineErr) {
					logger.Warn("skipped a bad line", "err", lineErr)
					continue
				}
				if !errors.Is(err, io.EOF) {
					logger.Warn("reading messages failed", "err", err)
				}
				return
			}
			if seen != nil && !seen(m, rd.reads != reads) {
				continue
			}
			ch <- m
		}
	}()
	return ch
}
