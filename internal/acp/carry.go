package acp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// The lines a Carrier writes are records, one per line, as a JSONLRecorder
// writes them, except for two kinds that begin with a byte of their own.
// Whoever reads them (a server, docs/protocol.md) stores the records and
// sends the message of each record of direction from_agent on to the
// client.
const (
	// CarriedForward begins a message to send to the client without
	// storing it: history an agent replays while it loads a session, which
	// is recorded only the first time (M5), and the message of a record
	// that redaction changed.
	CarriedForward = '>'
	// CarriedStored begins a record to store without sending its message
	// on: redaction changed it, and the client gets the message as the
	// plugs left it, on the CarriedForward line before it.
	CarriedStored = '='
)

// Carrier records the messages of a run whose records also carry its
// messages toward the client, such as a session process on a server's
// runner: each of those messages leaves the process once, inside its
// record, and the server takes it out for the client. The Proxy gives them
// to it (Proxy.Carrier) instead of writing them to ToClient, at the pace a
// Writer takes. It is safe for concurrent use.
//
// Records are redacted one by one with redact, which returns its argument
// itself when it has nothing to replace: a record that redaction changes is
// stored redacted, and its message goes to the client apart, unchanged.
// The record of a message toward the agent is written before Record
// returns, with the lines before it.
type Carrier struct {
	mu     sync.Mutex // keeps the lines in the order of their numbers
	out    *Writer
	closer io.Closer
	redact func([]byte) []byte // nil: nothing is redacted
	now    func() time.Time
	seq    uint64
	stamp  stamp
	head   []byte // the head of the last record made
	closed bool
}

// NewCarrier writes lines to w, a batch at a time; Close closes w when it
// is an io.Closer.
func NewCarrier(w io.Writer, redact func([]byte) []byte) *Carrier {
	c := &Carrier{out: NewWriter(w), redact: redact, now: time.Now}
	c.closer, _ = w.(io.Closer)
	return c
}

var (
	forwardTag  = []byte{CarriedForward}
	storedTag   = []byte{CarriedStored}
	endOfRecord = []byte(recordEnd)
)

// Record queues the record of m; toward the agent, it writes it and waits
// until it is written.
func (c *Carrier) Record(side Side, m *Message, by string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.seq++
	c.head = appendRecordHead(c.head[:0], c.seq, &c.stamp, c.now(), side, m, by)
	head, msg := c.head, m.Raw
	if c.redact != nil {
		head, msg = c.redact(head), c.redact(msg)
	}
	if same(head, c.head) && same(msg, m.Raw) {
		c.out.add(m.blk, queueOnly, part{head, false}, rawPart(m), part{endOfRecord, false})
	} else {
		if side == ToClient {
			c.queueAlone(m)
		}
		c.out.add(nil, queueOnly, part{storedTag, false}, part{head, false}, part{msg, false}, part{endOfRecord, false})
	}
	if side == ToClient {
		c.mu.Unlock()
		return
	}
	end := c.out.Enqueued()
	c.mu.Unlock()
	// In the store before the message goes on, as in a local transcript;
	// the lines queued after it are not waited for.
	_ = c.out.add(nil, Now)
	_ = c.out.WaitWritten(end)
}

// queueAlone queues m on a line of its own, to send to the client without
// storing it; c.mu is held.
func (c *Carrier) queueAlone(m *Message) {
	c.out.add(m.blk, queueOnly, part{forwardTag, false}, rawPart(m), part{newline, false})
}

// Carry sends m toward the client at pace: in its record when recorded
// (Record took it just before), else alone.
func (c *Carrier) Carry(m *Message, recorded bool, pace Pace) error {
	if !recorded {
		c.mu.Lock()
		c.queueAlone(m)
		c.mu.Unlock()
	}
	return c.out.add(nil, pace)
}

// rawPart is m's bytes as a part: held in the Reader's block when they lie
// in it, copied otherwise.
func rawPart(m *Message) part {
	if m.line != nil {
		return part{m.line[:len(m.line)-1], true}
	}
	return part{m.Raw, false}
}

// same reports whether a is b itself: what redact returns when it has
// nothing to replace.
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Flush writes the lines queued so far and returns the first error of a
// write.
func (c *Carrier) Flush() error { return c.out.Flush() }

// Close writes the lines left and closes the writer underneath. Records
// made after it are dropped.
func (c *Carrier) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.out.Flush()
	if c.closer != nil {
		err = errors.Join(err, c.closer.Close())
	}
	return err
}

// CarriedLine is a line a Carrier wrote, as its reader takes it apart: the
// record to store (nil for none) and the message to send on to the client
// (nil for none). line is without its line break.
func CarriedLine(line []byte) (record, message []byte, err error) {
	if len(line) == 0 {
		return nil, nil, errors.New("an empty line")
	}
	switch line[0] {
	case CarriedForward:
		return nil, line[1:], nil
	case CarriedStored:
		line = line[1:]
		if _, _, err := carriedRecord(line); err != nil {
			return nil, nil, err
		}
		return line, nil, nil
	}
	fromAgent, msg, err := carriedRecord(line)
	if err != nil || !fromAgent {
		return line, nil, err
	}
	return line, msg, nil
}

// carriedRecord finds a record's direction and its message by their
// places, as appendRecord writes them: the message is the last member.
// Whoever sends the message on checks it as a message.
func carriedRecord(rec []byte) (fromAgent bool, msg []byte, err error) {
	const direction = `","direction":"`
	i := bytes.Index(rec, []byte(direction))
	if !bytes.HasPrefix(rec, []byte(`{"seq":`)) || i < 0 || !bytes.HasSuffix(rec, []byte("}")) {
		return false, nil, fmt.Errorf("not a record: %.80q", rec)
	}
	rest := rec[i+len(direction):]
	switch {
	case bytes.HasPrefix(rest, []byte(ToClient.Direction()+`"`)):
		fromAgent = true
	case bytes.HasPrefix(rest, []byte(ToAgent.Direction()+`"`)):
	default:
		return false, nil, fmt.Errorf("a record of no direction: %.80q", rec)
	}
	j := bytes.Index(rest, []byte(recordMessage))
	if j < 0 {
		return false, nil, fmt.Errorf("a record without its message: %.80q", rec)
	}
	return fromAgent, rest[j+len(recordMessage) : len(rest)-1], nil
}

// carriedUpdate finds, in rec, a line a Carrier wrote, the session/update
// notification toward the client that its record carries, and the span of
// the sessionId of its params. ok is false for any other line. It reads
// the record's head by its places, as appendRecordHead writes it.
func carriedUpdate(rec []byte) (msg []byte, id span, ok bool) {
	rest, ok := bytes.CutPrefix(rec, []byte(`{"seq":`))
	if !ok {
		return nil, span{}, false
	}
	i := 0
	for i < len(rest) && isDigit(rest[i]) {
		i++
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"time":"`)); !ok {
		return nil, span{}, false
	}
	// A time as a stamp writes it holds no quote.
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return nil, span{}, false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], updateHead); !ok {
		return nil, span{}, false
	}
	if plug, ok := bytes.CutPrefix(rest, []byte(`"plug":`)); ok {
		s := scanner{data: plug}
		if len(plug) == 0 || plug[0] != '"' {
			return nil, span{}, false
		}
		if _, err := s.string(); err != nil {
			return nil, span{}, false
		}
		rest = plug[s.pos:]
	} else {
		rest = rec[len(rec)-len(rest)-1:] // from the comma before "message"
	}
	msg, ok = bytes.CutPrefix(rest, []byte(recordMessage))
	if !ok || !bytes.HasSuffix(msg, []byte("}")) {
		return nil, span{}, false
	}
	msg = msg[:len(msg)-1]
	id.start, id.end, ok = paramsSessionID(msg)
	return msg, id, ok
}

// updateHead is the part of the head of a record of a session/update
// toward the client from the end of its time (appendRecordHead).
var updateHead = []byte(`","direction":"` + ToClient.Direction() + `","kind":"notification","method":"session/update",`)

// updateStart is how a session/update begins as SDKs write it, up to
// the opening quote of its sessionId.
const updateStart = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`

// paramsSessionID finds the sessionId of the params of msg: as SDKs
// write a session/update, reading its start only; laid out otherwise, as
// Parse finds it, checking msg. ok is false when it is not found.
func paramsSessionID(msg []byte) (start, end int, ok bool) {
	if id, ok := bytes.CutPrefix(msg, []byte(updateStart)); ok {
		if i := bytes.IndexByte(id, '"'); i >= 0 && bytes.IndexByte(id[:i], '\\') < 0 {
			return len(updateStart) - 1, len(updateStart) + i + 1, true
		}
	}
	m := Message{Raw: msg}
	if m.parse("", true) != nil || m.session.end == 0 {
		return 0, 0, false
	}
	return m.session.start, m.session.end, true
}
