package acp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
)

// DefaultMaxLine is the longest line a Reader accepts when given no limit.
const DefaultMaxLine = 64 << 20

// MaxRecordLine is the longest line of a transcript, and of what a Carrier
// writes, and what their readers must accept: the record of a message of
// DefaultMaxLine bytes, whose head takes far less than the room left.
const MaxRecordLine = DefaultMaxLine + 1<<20

// prefixLen is the length of the start of a bad line kept in a LineError.
const prefixLen = 200

// A LineError reports a line of the stream that is not a message: too long,
// not JSON, or not JSON-RPC. The Reader that returns it goes on with the next
// line.
type LineError struct {
	Line   int    // 1-based line number in the stream
	Reason string // what is wrong with the line
	Prefix []byte // the first bytes of the line, for logs
}

func (e *LineError) Error() string {
	return fmt.Sprintf("acp: line %d: %s (line starts %q)", e.Line, e.Reason, e.Prefix)
}

// A Reader reads newline-delimited JSON-RPC messages from a stream.
//
// It reads the stream into blocks and hands out each message's line as a
// slice of its block, never writing a block where it has handed out bytes:
// a line is copied only when it spans the end of a block. A message keeps
// its block alive, so what is kept long (an id waiting for its answer) is
// better copied. A block that every message read from it has released
// (see [Message.Release]) is read into again.
type Reader struct {
	rd      io.Reader
	maxLine int
	size    int    // size of a new block
	blk     *block // the current block
	buf     []byte // blk.buf; buf[start:end] is read and not consumed
	start   int
	end     int
	scanned int                        // buf[start:scanned] holds no newline
	last    []byte                     // the last line read, with its terminator, when it had one
	free    chan *block                // released blocks of the usual size
	line    int                        // number of the last line read
	reads   int                        // reads from rd so far
	session []byte                     // the sessionId of the bundles of updates carried (BundleUpdates), or nil
	method  string                     // the method of the last request or notification read
	checked bool                       // see NewCheckedReader
	carried bool                       // see NewCarriedReader
	now     func(p []byte) (int, bool) // reads what rd holds, never waiting (readNow), or nil
	wait    func(p []byte) (int, bool) // reads what rd holds, or waits where it may (readNow), or nil
	err     error                      // io.EOF or the I/O error that ended the stream
}

// A block is a buffer a Reader reads the stream into. Its holds are the
// Reader's own while it reads into the block, and one for each message
// read from it and not released. When the last hold is released, the
// block goes back to its Reader.
type block struct {
	buf   []byte
	holds atomic.Int32
	free  chan *block // where it goes back; nil for a block of a long line
	// The Messages of the block's lines, which are reused with it; past
	// len(msgs), Messages are allocated one by one.
	msgs []Message
	used int
}

// msgsPerBlock is how many Messages a block of the usual size has room
// for: the number of 1 KiB lines it holds.
const msgsPerBlock = blockSize >> 10

// message returns a Message for a line of b.
func (b *block) message() *Message {
	if b.used == len(b.msgs) {
		return new(Message)
	}
	b.used++
	return &b.msgs[b.used-1]
}

// retain adds a hold on b.
func (b *block) retain() { b.holds.Add(1) }

// release drops n holds on b.
func (b *block) release(n int32) {
	if b.holds.Add(-n) == 0 && b.free != nil {
		select {
		case b.free <- b:
		default: // enough are waiting: this one is left to the collector
		}
	}
}

// freeBlocks is how many released blocks a Reader keeps for reuse.
const freeBlocks = 8

// blockSize is the size of a Reader's blocks; longer lines get blocks of
// their own.
const blockSize = 256 << 10

// NewReader returns a Reader of r that accepts lines of up to maxLine bytes,
// not counting the line terminator; maxLine 0 means DefaultMaxLine.
func NewReader(r io.Reader, maxLine int) *Reader {
	enlargePipe(r)
	rd := newReaderSize(r, maxLine, blockSize)
	rd.now, rd.wait = readNow(r)
	return rd
}

// NewCheckedReader returns a Reader of a stream whose lines the process
// that wrote it checked as JSON-RPC, as a session process does with every
// message it passes on: the Reader frames and classifies each line, and
// checks the structure of what it reads (the message's members, its
// params' members and their sessionId), but skips the other values
// without checking them, which is most of the work of reading a stream:
// a string to its closing quote, an object or array to its closing
// bracket. A line that a checking Reader would refuse for what is inside
// such a value is passed on as it is; one whose brackets do not close is
// refused.
func NewCheckedReader(r io.Reader, maxLine int) *Reader {
	rd := NewReader(r, maxLine)
	rd.checked = true
	return rd
}

// NewCarriedReader returns a checked Reader (NewCheckedReader) of the
// lines a Carrier wrote: it returns the messages toward the client that
// they carry, taken out of their records where they lie, and skips the
// other lines. A line that is not one a Carrier writes is a *LineError.
func NewCarriedReader(r io.Reader, maxLine int) *Reader {
	rd := NewCheckedReader(r, maxLine)
	rd.carried = true
	return rd
}

// BundleUpdates makes a carried Reader return the session/update
// notifications of records that have arrived one after the other as one
// Message of kind Bundle, with session (the id the client knows) as their
// sessionId, as a session process bundles them for a front end
// (Proxy.ClientSession). They are moved together in the block, over the
// heads of their records, and, laid out as SDKs write them, not read past
// their sessionId (paramsSessionID): the session process that recorded
// them checked them as it read them from its agent, and a front end
// passes a bundle on as it is.
func (r *Reader) BundleUpdates(session string) {
	r.session = jsonstr.Append(nil, session)
}

// newReaderSize is NewReader with blocks of size bytes, for tests.
func newReaderSize(r io.Reader, maxLine, size int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Reader{rd: r, maxLine: maxLine, size: size, free: make(chan *block, freeBlocks)}
}

// Next returns the next message of the stream. Lines end in "\n" or "\r\n";
// the last line may lack a terminator. Blank lines are skipped.
//
// A line that is too long, not JSON or not JSON-RPC is reported as a
// *LineError; a long line is discarded without being kept in memory beyond
// the limit. After a LineError, Next goes on with the following line. At the
// end of the stream Next returns io.EOF; any other error of the underlying
// reader is returned by this and every later call.
func (r *Reader) Next() (*Message, error) { return r.next(true) }

// errUnread is what next returns, without read, when the next line has
// not fully arrived.
var errUnread = errors.New("acp: the next line is not read yet")

// NextRead is Next of a message whose line was read already: without
// reading the stream, it returns ok false when the next line has not
// fully arrived (nothing is consumed then).
func (r *Reader) NextRead() (m *Message, ok bool, err error) {
	m, err = r.next(false)
	if err == errUnread {
		return nil, false, nil
	}
	return m, true, err
}

// next is Next; without read, it returns errUnread rather than read the
// stream.
func (r *Reader) next(read bool) (*Message, error) {
	for {
		line, err := r.readLine(read)
		if err != nil {
			return nil, err
		}
		if line == nil {
			continue
		}
		if r.checked && !r.carried && line[0] == '+' {
			return r.bundle(line, read)
		}
		if r.carried {
			if r.session != nil {
				if m := r.carriedBundle(line); m != nil {
					return m, nil
				}
			}
			_, msg, err := CarriedLine(line)
			if err != nil {
				return nil, &LineError{Line: r.line, Reason: err.Error(), Prefix: prefix(line)}
			}
			if msg == nil {
				continue
			}
			line = msg[:len(msg):len(msg)]
		}
		m := r.blk.message()
		*m = Message{Raw: line}
		if err := m.parse(r.method, r.checked); err != nil {
			return nil, &LineError{Line: r.line, Reason: err.Error(), Prefix: prefix(line)}
		}
		if m.Method != "" {
			r.method = m.Method
		}
		m.blk = r.blk
		m.blk.retain()
		if len(r.last) == len(line)+1 {
			m.line = r.last
		}
		return m, nil
	}
}

// bundle reads the lines of a bundle whose head is head (Bundle); without
// read, it returns errUnread, the head not consumed, when they have not
// all arrived.
func (r *Reader) bundle(head []byte, read bool) (*Message, error) {
	size, count, _ := strings.Cut(string(head[1:]), " ")
	n, err := strconv.Atoi(size)
	lines, cerr := strconv.Atoi(count)
	if err != nil || cerr != nil || n <= 0 || n > r.maxLine || lines <= 0 || lines > n {
		return nil, &LineError{Line: r.line, Reason: "not the head of a bundle of lines: want +BYTES LINES", Prefix: prefix(head)}
	}
	if !read && r.end-r.start < n && r.err == nil {
		r.start -= len(r.last)
		r.scanned, r.last = r.start, nil
		r.line--
		return nil, errUnread
	}
	for r.end-r.start < n && r.err == nil {
		r.fillFor(n)
	}
	if r.end-r.start < n {
		r.consume(r.end)
		if r.err != io.EOF {
			return nil, r.err
		}
		return nil, &LineError{Line: r.line, Reason: fmt.Sprintf("a bundle of %d bytes of lines cut short", n), Prefix: prefix(head)}
	}
	whole := r.buf[r.start : r.start+n : len(r.buf)]
	r.consume(r.start + n)
	r.line += lines - 1 // consume counted one
	if whole[0] != '{' || whole[n-1] != '\n' {
		return nil, &LineError{Line: r.line, Reason: "a bundle that is not of whole lines", Prefix: prefix(whole)}
	}
	m := r.blk.message()
	*m = Message{Raw: whole[: n-1 : n-1], Kind: Bundle, Method: "session/update", blk: r.blk, line: whole}
	m.blk.retain()
	r.method = m.Method
	return m, nil
}

// carriedBundle returns the bundle that begins with line, the line just
// read, when it is the record of a session/update toward the client
// (BundleUpdates): its message and those of the records of such updates
// after it that have arrived whole, up to maxBundle bytes, each on a line
// of its own, with r.session as its sessionId. Nil when line is no such
// record; it is then read as any other.
func (r *Reader) carriedBundle(line []byte) *Message {
	if len(r.last) != len(line)+1 {
		return nil // a line ended by "\r\n"
	}
	start := len(r.buf) - cap(r.last)
	w := r.put(start, start, start, line)
	if w < 0 {
		return nil
	}
	for {
		i := bytes.IndexByte(r.buf[r.start:r.end], '\n')
		if i < 0 {
			break
		}
		next := r.put(start, w, r.start, r.buf[r.start:r.start+i])
		if next < 0 {
			break
		}
		w = next
		r.consume(r.start + i + 1)
	}
	whole := r.buf[start:w:w]
	m := r.blk.message()
	*m = Message{Raw: whole[: len(whole)-1 : len(whole)-1], Kind: Bundle, Method: "session/update", blk: r.blk, line: whole}
	m.blk.retain()
	r.method = m.Method
	return m
}

// put moves the message of line, the line at offset at of r.buf, to w
// with r.session as its sessionId, and a line break after it, when line
// is the record of a session/update toward the client and the bundle
// that begins at start stays within maxBundle. It returns where the next
// message goes, or -1 when line is not put.
func (r *Reader) put(start, w, at int, line []byte) int {
	msg, id, ok := carriedUpdate(line)
	if !ok {
		return -1
	}
	at += len(line) - 1 - len(msg) // msg's offset: the record's "}" follows it
	end := w + len(msg) - (id.end - id.start) + len(r.session) + 1
	// The sessionId, written, must not reach what is left to move of
	// msg: the record's head makes room for a longer one.
	if end-start > maxBundle || w+id.start+len(r.session) > at+id.end {
		return -1
	}
	copy(r.buf[w:], msg[:id.start])
	w += id.start
	w += copy(r.buf[w:], r.session)
	w += copy(r.buf[w:], msg[id.end:])
	r.buf[w] = '\n'
	return w + 1
}

// readLine returns the next line without its terminator, or nil for a blank
// line.
func (r *Reader) readLine(read bool) ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.scanned:r.end], '\n'); i >= 0 {
			nl := r.scanned + i
			body := r.buf[r.start:nl]
			if len(body) > 0 && body[len(body)-1] == '\r' {
				body = body[:len(body)-1]
			}
			whole := r.buf[r.start : nl+1 : len(r.buf)]
			r.consume(nl + 1)
			r.last = whole
			return r.body(body)
		}
		r.scanned = r.end
		if r.err != nil {
			if r.start == r.end || r.err != io.EOF {
				r.consume(r.end) // a line cut by an I/O error is lost
				return nil, r.err
			}
			body := r.buf[r.start:r.end] // the last line has no terminator
			r.consume(r.end)
			return r.body(body)
		}
		if !read {
			return nil, errUnread
		}
		// Without its newline, a line of maxLine bytes may hold a "\r" more.
		if r.end-r.start > r.maxLine+1 {
			return nil, r.discard()
		}
		r.fill()
	}
}

// Buffered reports whether the Reader holds bytes of the stream not
// returned yet: the next message, or part of it, has already arrived.
func (r *Reader) Buffered() bool { return r.start < r.end }

// consume ends the current line at offset next of the block.
func (r *Reader) consume(next int) {
	r.line++
	r.last = nil
	r.start, r.scanned = next, next
}

// body checks a line read whole, without its terminator, and returns it
// capped so that appending to it cannot write into the block.
func (r *Reader) body(line []byte) ([]byte, error) {
	if blank(line) {
		return nil, nil
	}
	if len(line) > r.maxLine {
		return nil, r.tooLong(len(line), line)
	}
	return line[:len(line):len(line)], nil
}

// fill reads more of the stream after buf[end]. When little room is left, it
// moves the unconsumed part of the line to a new block, at least twice as
// large as that part.
func (r *Reader) fill() { r.fillFor(0) }

// fillFor is fill that makes room for need bytes from buf[start] on.
func (r *Reader) fillFor(need int) {
	r.room(need)
	if r.wait != nil {
		if n, ok := r.wait(r.buf[r.end:]); ok {
			r.reads++
			r.end += n
			return
		}
	}
	n, err := r.rd.Read(r.buf[r.end:])
	r.reads++
	r.end += n
	r.err = err
}

// fillNow reads what the stream holds already, without waiting, where the
// stream allows it (readNow), and reports whether it read anything. What
// it leaves is the next fill's: a line too long, the end of the stream, an
// error.
func (r *Reader) fillNow() bool {
	if r.now == nil || r.err != nil || r.end-r.start > r.maxLine+1 {
		return false
	}
	r.room(0)
	n, ok := r.now(r.buf[r.end:])
	if !ok {
		return false
	}
	r.reads++
	r.end += n
	return true
}

// room makes room to read into after buf[end], and for need bytes from
// buf[start] on.
func (r *Reader) room(need int) {
	if len(r.buf)-r.end < r.size/16+1 || len(r.buf)-r.start < need {
		pending := r.end - r.start
		// A block of maxLine+2 bytes holds any line that can be accepted.
		size := max(min(max(r.size, 2*pending), r.maxLine+2), need)
		b := r.newBlock(size)
		copy(b.buf, r.buf[r.start:r.end])
		if r.blk != nil {
			r.blk.release(1)
		}
		r.blk, r.buf, r.start, r.end, r.scanned = b, b.buf, 0, pending, pending
	}
}

// newBlock returns a block of size bytes with the Reader's hold: a released
// one when it has the usual size and one is free.
func (r *Reader) newBlock(size int) *block {
	var b *block
	if size == r.size {
		select {
		case b = <-r.free:
			b.used = 0
		default:
			b = &block{buf: make([]byte, size), free: r.free, msgs: make([]Message, msgsPerBlock)}
		}
	} else {
		b = &block{buf: make([]byte, size)}
	}
	b.holds.Store(1)
	return b
}

// discard skips the rest of a line that is too long, of which
// buf[start:end] has been read, and returns its LineError, or nil when the
// line is blank. Its bytes are counted, not kept.
func (r *Reader) discard() error {
	head := prefix(r.buf[r.start:r.end])
	n := 0
	isBlank := true
	var last byte // the last byte of the line read so far
	for {
		part := r.buf[r.start:r.end]
		i := bytes.IndexByte(part, '\n')
		if i >= 0 {
			part = part[:i]
		}
		n += len(part)
		isBlank = isBlank && blank(part)
		if len(part) > 0 {
			last = part[len(part)-1]
		}
		switch {
		case i >= 0:
			r.consume(r.start + i + 1)
			if last == '\r' {
				n--
			}
		case r.err == nil:
			r.start, r.scanned = r.end, r.end
			r.fill()
			continue
		case r.err != io.EOF:
			r.consume(r.end)
			return r.err
		default:
			r.consume(r.end)
		}
		if isBlank {
			return nil
		}
		return r.tooLong(n, head[:min(len(head), n)])
	}
}

func (r *Reader) tooLong(n int, line []byte) error {
	return &LineError{
		Line:   r.line,
		Reason: fmt.Sprintf("line of %d bytes exceeds the limit of %d bytes", n, r.maxLine),
		Prefix: prefix(line),
	}
}

// prefix returns a copy of the start of line.
func prefix(line []byte) []byte {
	return bytes.Clone(line[:min(len(line), prefixLen)])
}

// blank reports whether line holds only JSON whitespace.
func blank(line []byte) bool {
	for _, c := range line {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// interrupt makes a read of r's stream under way, and those after, fail
// at once, where the stream has read deadlines; resume lifts that. It
// returns nil where the stream has none (or the runtime does not poll it:
// an inherited descriptor), whose reads cannot be interrupted.
func (r *Reader) interrupt() (resume func()) {
	d, ok := r.rd.(interface{ SetReadDeadline(time.Time) error })
	if !ok || d.SetReadDeadline(time.Unix(1, 0)) != nil {
		return nil
	}
	return func() { _ = d.SetReadDeadline(time.Time{}) }
}
