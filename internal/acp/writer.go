package acp

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// A Writer writes JSON-RPC messages to a stream, one per line, never
// re-encoding them. It is safe for concurrent use and keeps the order of
// its calls.
//
// Messages wait in a queue while a write to the stream is under way, and
// go out together in the next one, so a busy stream costs one system call
// per batch rather than per message. A message read by a [Reader] is
// queued as a slice of the Reader's block, not copied: consecutive lines
// of a block are one piece of the queue, and where the stream is a file or
// socket a batch of pieces is written with one writev.
type Writer struct {
	mu       sync.Mutex
	cond     sync.Cond // signalled when the queue drains or an error occurs
	w        io.Writer
	vec      vectorWriter // w's writev, or nil
	queue    [][]byte     // lines waiting to be written, merged where contiguous
	queued   int          // bytes in queue
	copies   []byte       // the lines queue holds copies of
	holds    []holds      // the holds on blocks that queue has lines of
	spare    [][]byte     // the last written queue, for reuse
	spareCp  []byte       // the last written copies, for reuse
	spareH   []holds      // the last written holds, for reuse
	joined   []byte       // a batch joined for a w without writev
	flushing bool         // a batch is being written
	late     *time.Timer  // writes what WithNext left waiting, after delay
	delay    time.Duration
	waiting  bool // late is set
	// heads are the bundles of the queue (WriteBundled): where their heads
	// go, written when the batch is; bundleOpen: the last is still open.
	heads      []bundleHead
	bundleOpen bool
	headBytes  []byte // the heads of the batch being written
	err        error  // the first write error; later writes fail with it
	// enqueued and written count the bytes queued and written so far:
	// a caller waits for its own line (WaitWritten), not for those after.
	enqueued, written uint64
}

// Enqueued is the count of bytes queued so far, its last line's end.
func (w *Writer) Enqueued() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enqueued
}

// WaitWritten waits until the first n bytes queued are written, or a
// write failed, and returns the first write error.
func (w *Writer) WaitWritten(n uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flushing && len(w.queue) > 0 && w.err == nil && w.written < n {
		w.flushing = true
		// Ends once the queue is written, or the stream fails; Flush waits for it (flushing).
		go w.flush()
	}
	for w.err == nil && w.written < n {
		w.cond.Wait()
	}
	return w.err
}

// A Pace says when a message given to a Writer goes out.
type Pace uint8

const (
	// Now: at once, on the caller's goroutine, unless a write is under
	// way (the message then goes with the next batch).
	Now Pace = iota
	// Behind: by a goroutine of the Writer's, so that the caller never
	// waits on the stream.
	Behind
	// WithNext: the caller has more messages on their way to the Writer;
	// this one waits for them and goes out in the same write, once they
	// make a batch (batchBytes) or at the latest after batchDelay.
	WithNext
	// queueOnly: the line waits for a later call's pace (Carrier).
	queueOnly
)

// batchBytes is how much WithNext gathers before it writes; batchDelay how
// long a message waits at most for the others announced with it, for when
// they are slow to come (a plug's handler at work on the next one).
const (
	batchBytes = 64 << 10
	batchDelay = 200 * time.Microsecond
)

// holds counts holds on a block: a Writer's, or those that records just
// encoded drop together.
type holds struct {
	blk *block
	n   int32
}

// add counts a hold on blk, dropping those counted on another block
// first: the holds of a run of messages of one block go with one atomic
// add, not one each (the count is shared with the goroutine reading into
// the block).
func (h *holds) add(blk *block) {
	if blk != h.blk {
		h.release()
		h.blk = blk
	}
	h.n++
}

// release drops the holds counted.
func (h *holds) release() {
	if h.blk != nil && h.n > 0 {
		h.blk.release(h.n)
	}
	*h = holds{}
}

// A vectorWriter writes bufs in order with as few system calls as it can.
type vectorWriter func(bufs [][]byte) error

// A BuffersWriter writes pieces one after the other as writev does: a
// Writer gives it its batches without joining them first.
type BuffersWriter interface {
	WriteBuffers(bufs [][]byte) error
}

// A bundleHead is the head of a bundle in a queue: the index of its piece,
// and the bytes and the number of the bundle's lines.
type bundleHead struct{ at, n, lines int }

// maxBundle is the most bytes of lines a bundle holds: a Reader holds a
// bundle in one of its blocks.
const maxBundle = blockSize / 4

// EnlargePipe asks for the capacity a Reader or Writer asks of its pipe
// when f is a pipe, for a process that passes ACP on without them (acp
// --server's stdout); for anything else it does nothing.
func EnlargePipe(f any) { enlargePipe(f) }

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	enlargePipe(w)
	wr := &Writer{w: w, vec: writev(w), delay: batchDelay}
	if bw, ok := w.(BuffersWriter); ok {
		wr.vec = bw.WriteBuffers
	}
	wr.cond.L = &wr.mu
	return wr
}

// maxPending is how much a Writer queues before a write waits for the
// stream.
const maxPending = 4 << 20

// Write queues a copy of raw followed by a newline. raw must not contain a
// line break. It returns the error of an earlier failed write, if any; use
// Flush to learn whether the message itself went out.
func (w *Writer) Write(raw []byte) error {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return fmt.Errorf("acp: message contains a line break at offset %d", i)
	}
	return w.add(nil, Behind, part{raw, false}, part{newline, false})
}

// WriteMessage queues m, without copying it when it is the line a Reader
// read, to go out at pace.
func (w *Writer) WriteMessage(m *Message, pace Pace) error { return w.message(m, pace, false) }

// message queues m as it is, bundled or not.
func (w *Writer) message(m *Message, pace Pace, bundled bool) error {
	if m.line != nil {
		return w.addLine(m.blk, pace, bundled, part{m.line, true})
	}
	return w.addLine(nil, pace, bundled, part{m.Raw, false}, part{newline, false})
}

// WriteReplacing is WriteMessage of m with old, a part of m.Raw (such as a
// member's value), replaced by val: what comes before and after old is not
// copied when m is the line a Reader read, only val is. It panics when old
// does not lie in m.Raw.
func (w *Writer) WriteReplacing(m *Message, old, val []byte, pace Pace) error {
	return w.replacing(m, old, val, pace, false)
}

// WriteBundled is WriteReplacing of a session/update notification toward
// the client (WriteMessage when old is nil), in a bundle with the bundled
// lines queued next to it: a head line, "+", the bytes of the bundle's
// lines, a space and their number, goes before them, so that a checked
// Reader takes them as one Message of kind Bundle. A line longer than a
// bundle goes on its own, as WriteReplacing writes it.
func (w *Writer) WriteBundled(m *Message, old, val []byte, pace Pace) error {
	if len(m.Raw)-len(old)+len(val) >= maxBundle {
		return w.replacing(m, old, val, pace, false)
	}
	if old == nil {
		return w.message(m, pace, true)
	}
	return w.replacing(m, old, val, pace, true)
}

func (w *Writer) replacing(m *Message, old, val []byte, pace Pace, bundled bool) error {
	// old is a slice of Raw: its offset is told by their capacities.
	off := cap(m.Raw) - cap(old)
	if off < 0 || off+len(old) > len(m.Raw) || (len(old) > 0 && &m.Raw[off] != &old[0]) {
		panic("acp: WriteReplacing: old does not lie in the message")
	}
	if bytes.IndexByte(val, '\n') >= 0 || bytes.IndexByte(val, '\r') >= 0 {
		val = oneLine(val)
	}
	end := off + len(old)
	if m.line != nil {
		return w.addLine(m.blk, pace, bundled, part{m.line[:off], true}, part{val, false}, part{m.line[end:], true})
	}
	return w.addLine(nil, pace, bundled, part{m.Raw[:off], false}, part{val, false}, part{m.Raw[end:], false}, part{newline, false})
}

var newline = []byte{'\n'}

// A part is a piece of a line to queue: a slice of the block given to add
// (held), or bytes to copy.
type part struct {
	b    []byte
	held bool
}

// add queues the parts of a line, and writes the queue, has a flusher
// write it, or leaves it for the lines to come, as pace says.
func (w *Writer) add(blk *block, pace Pace, parts ...part) error {
	return w.addLine(blk, pace, false, parts...)
}

// addLine is add of a line that is bundled or not (WriteBundled).
func (w *Writer) addLine(blk *block, pace Pace, bundled bool, parts ...part) error {
	w.mu.Lock()
	// A line only queued is on its way: its pace follows, and waits.
	for w.err == nil && w.queued > maxPending && w.flushing && pace != queueOnly {
		w.cond.Wait()
	}
	if err := w.err; err != nil {
		w.mu.Unlock()
		return err
	}
	if bundled {
		w.bundle(parts)
	} else {
		w.bundleOpen = false
	}
	for _, p := range parts {
		switch {
		case p.held:
			w.hold(blk)
			w.enqueue(p.b)
		case len(p.b) > 0:
			if w.copies == nil {
				w.copies = make([]byte, 0, 4<<10)
			}
			start := len(w.copies)
			w.copies = append(w.copies, p.b...)
			w.enqueue(w.copies[start:])
		}
	}
	if w.flushing || pace == queueOnly || len(w.queue) == 0 {
		w.mu.Unlock()
		return nil
	}
	if pace == WithNext && w.queued < batchBytes {
		if !w.waiting {
			w.waiting = true
			if w.late == nil {
				w.late = time.AfterFunc(w.delay, w.flushLate)
			} else {
				w.late.Reset(w.delay)
			}
		}
		w.mu.Unlock()
		return nil
	}
	w.flushing = true
	if pace != Now {
		w.mu.Unlock()
		// Ends once the queue is written, or the stream fails; Flush waits for it (flushing).
		go w.flush()
		return nil
	}
	// Written here, sparing the message a flusher's start; what others
	// queue meanwhile is left to a flusher, so the caller goes on.
	w.writeBatch()
	err := w.err
	w.mu.Unlock()
	w.flushRest()
	return err
}

// bundle counts the parts of a line in the open bundle, or opens one, its
// head a piece of the queue left empty until the batch is written.
func (w *Writer) bundle(parts []part) {
	n := 0
	for _, p := range parts {
		n += len(p.b)
	}
	if !w.bundleOpen || w.heads[len(w.heads)-1].n+n > maxBundle {
		w.heads = append(w.heads, bundleHead{at: len(w.queue)})
		w.queue = append(w.queue, nil)
		w.bundleOpen = true
	}
	w.heads[len(w.heads)-1].n += n
	w.heads[len(w.heads)-1].lines++
}

// enqueue appends line to the queue, extending the last piece when line
// follows it in memory. Only the piece's capacity is trusted for that: it
// reaches to the end of the piece's block, so both lie in one allocation.
func (w *Writer) enqueue(line []byte) {
	w.queued += len(line)
	w.enqueued += uint64(len(line))
	if n := len(w.queue); n > 0 {
		last := w.queue[n-1]
		if cap(last) > len(last) && len(line) > 0 && &last[:len(last)+1][len(last)] == &line[0] && cap(last)-len(last) >= len(line) {
			w.queue[n-1] = last[:len(last)+len(line)]
			return
		}
	}
	w.queue = append(w.queue, line)
}

// hold adds a hold on blk, which a line of the queue lies in.
func (w *Writer) hold(blk *block) {
	blk.retain()
	if n := len(w.holds); n > 0 && w.holds[n-1].blk == blk {
		w.holds[n-1].n++
		return
	}
	w.holds = append(w.holds, holds{blk, 1})
}

// flushLate writes what WithNext left waiting for lines that did not come
// in time.
func (w *Writer) flushLate() {
	w.mu.Lock()
	w.waiting = false
	if w.flushing || len(w.queue) == 0 {
		w.mu.Unlock()
		return
	}
	w.flushing = true
	w.mu.Unlock()
	w.flush()
}

// flush writes batches until the queue is empty.
func (w *Writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) > 0 && w.err == nil {
		w.writeBatch()
	}
	w.flushing = false
	w.cond.Broadcast()
}

// flushRest ends the write that add made: a flusher writes what was
// queued meanwhile.
func (w *Writer) flushRest() {
	w.mu.Lock()
	more := len(w.queue) > 0 && w.err == nil
	if !more {
		w.flushing = false
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	if more {
		// Ends once the queue is written, or the stream fails; Flush waits for it (flushing).
		go w.flush()
	}
}

// writeBatch writes the queue as it is, with w.mu held on entry and exit
// but not during the write.
func (w *Writer) writeBatch() {
	batch, copies, held := w.queue, w.copies, w.holds
	heads := w.headBytes[:0]
	for _, h := range w.heads {
		start := len(heads)
		heads = strconv.AppendInt(append(heads, '+'), int64(h.n), 10)
		heads = strconv.AppendInt(append(heads, ' '), int64(h.lines), 10)
		heads = append(heads, '\n')
		batch[h.at] = heads[start:len(heads):len(heads)]
	}
	w.headBytes, w.heads, w.bundleOpen = heads, w.heads[:0], false
	// The spares become the queue, and the batch's buffers the spares once
	// written: no buffer is ever both.
	size := uint64(w.queued)
	w.queue, w.copies, w.holds, w.queued = w.spare[:0], w.spareCp[:0], w.spareH[:0], 0
	w.spare, w.spareCp, w.spareH = nil, nil, nil
	w.mu.Unlock()
	err := w.writeOut(batch)
	clear(batch)
	for _, h := range held {
		h.blk.release(h.n)
	}
	clear(held)
	w.mu.Lock()
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("acp: write message: %w", err)
		for _, h := range w.holds {
			h.blk.release(h.n)
		}
		w.queue, w.copies, w.holds, w.queued = nil, nil, nil, 0
		w.heads, w.bundleOpen = nil, false
	}
	w.written += size
	w.spare, w.spareH = batch[:0], held[:0]
	// Buffers grown by a huge message are not kept.
	if cap(copies) <= 2*maxPending {
		w.spareCp = copies[:0]
	}
	w.cond.Broadcast()
}

// writeOut writes the pieces of a batch. Only the writer of a batch calls
// it, so w.joined is its own.
func (w *Writer) writeOut(batch [][]byte) error {
	// Every batch takes the same way, so a stream that breaks fails the
	// same way (a broken pipe is an error, not a SIGPIPE) whatever its size.
	if w.vec != nil {
		return w.vec(batch)
	}
	if len(batch) == 1 {
		_, err := w.w.Write(batch[0])
		return err
	}
	joined := w.joined[:0]
	for _, b := range batch {
		joined = append(joined, b...)
	}
	if cap(joined) <= 2*maxPending {
		w.joined = joined
	}
	_, err := w.w.Write(joined)
	return err
}

// Flush waits until every message written so far went out, and returns the
// first write error.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flushing && len(w.queue) > 0 && w.err == nil {
		// Left waiting by WithNext: written now, not after batchDelay.
		w.flushing = true
		// Ends once the queue is written, or the stream fails; Flush waits for it (flushing).
		go w.flush()
	}
	for w.err == nil && (w.flushing || len(w.queue) > 0) {
		w.cond.Wait()
	}
	return w.err
}
