package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
)

// Recorder receives every message where it leaves the chain (M5): toward
// the agent as the agent sees it, toward the client as the client gets it.
// by names the plug that answered a request, or is empty.
type Recorder interface {
	// Record must not keep m or its bytes, unless it takes a hold of its
	// own on m's block (JSONLRecorder does): once sent, a message's buffer
	// may be reused.
	Record(side Side, m *Message, by string)
}

// Record is one line of a transcript.
type Record struct {
	Seq       uint64          `json:"seq"`
	Time      time.Time       `json:"time"`
	Direction string          `json:"direction"` // "to_agent" or "from_agent"
	Kind      string          `json:"kind"`
	Method    string          `json:"method,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
	Plug      string          `json:"plug,omitempty"` // the plug that answered
	Message   json.RawMessage `json:"message"`
}

// Direction is how plugs and records name a side: messages toward the
// agent are "to_agent", toward the client "from_agent".
func (s Side) Direction() string {
	if s == ToAgent {
		return "to_agent"
	}
	return "from_agent"
}

// JSONLRecorder writes records as JSON lines. It is safe for concurrent use.
//
// The records of requests and responses are written before Record returns,
// with those before them: a transcript stays current at each turn. Those of
// notifications (the bulk of a stream) gather in chunks that are written in
// the background once full, so that the writes to the file keep the stream
// waiting only when they fall behind. A record is appended to a chunk that
// has room for it: records are copied once, never moved by a chunk's growth.
// A notification still in the block a Reader read it into is not copied by
// Record: it keeps a hold on its block, and the background write encodes
// its record, off the goroutine that passes the stream on.
type JSONLRecorder struct {
	mu      sync.Mutex
	cond    sync.Cond // signalled when a background write ends
	w       io.Writer
	c       io.Closer
	cur     []byte   // the chunk records are appended to
	full    [][]byte // chunks filled and not handed to a write yet
	queued  int      // bytes in full
	free    [][]byte // written chunks, for reuse
	writing bool     // a background write is under way
	seq     uint64
	err     error
	now     func() time.Time
	stamp   stamp
	// later are the records of notifications held in their blocks, to be
	// encoded after those in full and cur; laterSize bounds their size.
	later     []recordEntry
	laterSize int
	spare     []recordEntry // a later handed to a background write, for reuse
	// behind is the chunk and stamp of the background write, which only
	// it uses, without r.mu.
	behind      []byte
	behindStamp stamp
}

// A recordEntry is a record before it is encoded. One that Record took
// without encoding it (in later) keeps a hold on its message's block until
// it is encoded.
type recordEntry struct {
	seq  uint64
	t    time.Time
	side Side
	m    *Message
	by   string
}

// encode appends the record to b and drops the message's hold into h.
func (l *recordEntry) encode(b []byte, st *stamp, h *holds) []byte {
	b = appendRecord(b, l.seq, st, l.t, l.side, l.m, l.by)
	l.drop(h)
	return b
}

// drop adds the message's hold to h, and forgets the record.
func (l *recordEntry) drop(h *holds) {
	h.add(l.m.blk)
	*l = recordEntry{}
}

// recordBatch is the size of a chunk, and so of most writes: a file takes
// large writes for half the CPU time per byte of 64 KiB ones. Past
// maxRecordBacklog of full chunks, Record waits for the writes. freeChunks
// is how many written chunks are kept for reuse.
const (
	recordBatch      = 1 << 20
	maxRecordBacklog = 8 << 20
	freeChunks       = 4
)

// NewJSONLRecorder records to w; Close writes what is left and closes w
// when it is an io.Closer.
func NewJSONLRecorder(w io.Writer) *JSONLRecorder {
	r := &JSONLRecorder{w: w, now: time.Now}
	r.cond.L = &r.mu
	if c, ok := w.(io.Closer); ok {
		r.c = c
	}
	return r
}

// CreateTranscript records to a new file at path (0600: transcripts may
// hold what the agent saw).
func CreateTranscript(path string) (*JSONLRecorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return NewJSONLRecorder(f), nil
}

func (r *JSONLRecorder) Record(side Side, m *Message, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.seq++
	e := recordEntry{r.seq, r.now(), side, m, by}
	if m.Kind == Notification && m.blk != nil {
		m.blk.retain()
		r.later = append(r.later, e)
		r.laterSize += recordSize(m, by)
	} else {
		r.encodeLater()
		r.roomFor(&e)
		r.cur = appendRecord(r.cur, e.seq, &r.stamp, e.t, e.side, e.m, e.by)
	}
	switch {
	case m.Kind != Notification:
		r.writeNow()
	case r.queued+r.laterSize >= maxRecordBacklog:
		r.writeNow()
	case !r.writing && (len(r.full) > 0 || r.laterSize >= recordBatch):
		chunks, later := r.take()
		r.writing = true
		// writeNow (Flush, Close) waits for it (writing).
		go r.writeBehind(chunks, later)
	}
}

// roomFor makes room in cur for the record of e, with r.mu held.
func (r *JSONLRecorder) roomFor(e *recordEntry) {
	if need := recordSize(e.m, e.by); len(r.cur)+need > cap(r.cur) {
		r.seal(need)
	}
}

// encodeLater encodes the later records into cur, with r.mu held: a record
// that follows them is about to be appended.
func (r *JSONLRecorder) encodeLater() {
	var h holds
	for i := range r.later {
		r.roomFor(&r.later[i])
		r.cur = r.later[i].encode(r.cur, &r.stamp, &h)
	}
	h.release()
	r.later, r.laterSize = r.later[:0], 0
}

// take hands the records gathered, in order, to a background write: the
// chunks, cur among them, then the later records. With r.mu held.
func (r *JSONLRecorder) take() ([][]byte, []recordEntry) {
	if len(r.later) > 0 && len(r.cur) > 0 {
		r.seal(0)
	}
	chunks, later := r.full, r.later
	r.full, r.queued, r.later, r.laterSize, r.spare = nil, 0, r.spare, 0, nil
	return chunks, later
}

// seal queues the current chunk when it holds records, and starts one with
// room for need bytes, with r.mu held.
func (r *JSONLRecorder) seal(need int) {
	if len(r.cur) > 0 {
		r.full = append(r.full, r.cur)
		r.queued += len(r.cur)
	}
	if n := len(r.free); n > 0 && cap(r.free[n-1]) >= need {
		r.cur, r.free = r.free[n-1], r.free[:n-1]
		return
	}
	r.cur = make([]byte, 0, max(recordBatch, need))
}

// recycle keeps written chunks of the usual size for reuse, with r.mu held.
func (r *JSONLRecorder) recycle(chunks [][]byte) {
	for _, c := range chunks {
		if len(r.free) < freeChunks && cap(c) == recordBatch {
			r.free = append(r.free, c[:0])
		}
	}
}

// writeNow writes the queued chunks and the current one after the
// background write under way, with r.mu held.
func (r *JSONLRecorder) writeNow() {
	for r.writing {
		r.cond.Wait()
	}
	r.encodeLater()
	for _, c := range append(r.full, r.cur) {
		if r.err == nil && len(c) > 0 {
			_, r.err = r.w.Write(c)
		}
	}
	r.recycle(r.full)
	clear(r.full)
	r.full, r.queued, r.cur = r.full[:0], 0, r.cur[:0]
}

// writeBehind writes chunks, then encodes and writes the later records,
// without r.mu; then the records gathered meanwhile.
func (r *JSONLRecorder) writeBehind(chunks [][]byte, later []recordEntry) {
	for {
		err := r.writeChunks(chunks)
		var h holds
		var b []byte // the chunk encoded into; nil until one is taken
		for i := range later {
			l := &later[i]
			if err == nil && b != nil && len(b)+recordSize(l.m, l.by) > recordBatch {
				_, err = r.w.Write(b)
				b = nil
			}
			if err != nil {
				l.drop(&h)
				continue
			}
			if b == nil {
				b = r.chunk()
			}
			b = l.encode(b, &r.behindStamp, &h)
		}
		h.release()
		if err == nil && len(b) > 0 {
			_, err = r.w.Write(b)
		}
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.recycle(chunks)
		if r.spare == nil {
			r.spare = later[:0]
		}
		if (len(r.full) == 0 && r.laterSize < recordBatch) || r.err != nil {
			r.writing = false
			r.cond.Broadcast()
			r.mu.Unlock()
			return
		}
		chunks, later = r.take()
		r.mu.Unlock()
	}
}

// chunk returns an empty chunk for the background write to encode into,
// the recorder's own.
func (r *JSONLRecorder) chunk() []byte {
	if r.behind == nil {
		r.behind = make([]byte, 0, recordBatch)
	}
	return r.behind[:0]
}

// writeChunks writes chunks in order and returns the first error.
func (r *JSONLRecorder) writeChunks(chunks [][]byte) error {
	for _, c := range chunks {
		if _, err := r.w.Write(c); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the records gathered so far, after the background write
// under way, and returns the first error of a write.
func (r *JSONLRecorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeNow()
	return r.err
}

// Close writes the records left and closes the underlying writer.
func (r *JSONLRecorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.err
	r.writeNow()
	if err == nil {
		err = r.err
	}
	if r.c != nil {
		if cerr := r.c.Close(); err == nil {
			err = cerr
		}
	}
	if r.err == nil {
		r.err = errors.New("acp: transcript closed")
	}
	return err
}

// recordSize bounds the bytes appendRecord writes for m: its fixed parts,
// and its strings escaped at worst (\u00XX for each byte).
func recordSize(m *Message, by string) int {
	return 192 + 6*len(m.Method) + len(m.ID) + 6*len(by) + len(m.Raw)
}

// appendRecord encodes a Record by hand so that the message's bytes appear
// exactly as they were sent (encoding/json would re-escape them).
func appendRecord(b []byte, seq uint64, st *stamp, t time.Time, side Side, m *Message, by string) []byte {
	b = appendRecordHead(b, seq, st, t, side, m, by)
	b = append(b, m.Raw...)
	return append(b, recordEnd...)
}

// recordEnd ends a record, after its message.
const recordEnd = "}\n"

// appendRecordHead encodes a Record up to its message, the last member.
func appendRecordHead(b []byte, seq uint64, st *stamp, t time.Time, side Side, m *Message, by string) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":"`...)
	// An RFC 3339 time needs no escaping.
	b = st.append(b, t)
	b = append(b, `","direction":"`...)
	b = append(b, side.Direction()...)
	b = append(b, `","kind":"`...)
	b = append(b, m.Kind.String()...)
	b = append(b, '"')
	if m.Method != "" {
		b = append(b, `,"method":`...)
		b = jsonstr.Append(b, m.Method)
	}
	if m.ID != nil {
		b = append(b, `,"id":`...)
		b = append(b, m.ID...)
	}
	if by != "" {
		b = append(b, `,"plug":`...)
		b = jsonstr.Append(b, by)
	}
	return append(b, recordMessage...)
}

// recordMessage is the key of a record's message.
const recordMessage = `,"message":`

// stamp writes times as time.RFC3339Nano does in UTC, formatting each
// second once: a stream records many messages a second.
type stamp struct {
	sec    int64
	prefix []byte // sec as "2006-01-02T15:04:05"; nil before the first time
}

func (s *stamp) append(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); s.prefix == nil || sec != s.sec {
		s.sec, s.prefix = sec, t.AppendFormat(s.prefix[:0], "2006-01-02T15:04:05")
	}
	b = append(b, s.prefix...)
	if ns := t.Nanosecond(); ns != 0 {
		// The nanoseconds without their trailing zeros, as .999999999 has.
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(frac)
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}
