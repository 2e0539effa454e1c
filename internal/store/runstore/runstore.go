// Package runstore carries the store of one run over a connection: a
// session process on a server's runner reads its session and records its
// reports, transcript and persisted plug state through it (L7, C11). The
// server's side answers for one session only, and refuses writes once the
// run may no longer write (a run the server failed).
package runstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Op is an operation of the wire protocol.
type Op string

const (
	OpSession  Op = "session"
	OpLoaded   Op = "loaded"
	OpPaused   Op = "paused"
	OpTornDown Op = "torn_down"
	// OpTitled records the session's title. A server before it answers
	// that it knows no such operation: the title is then not recorded.
	OpTitled Op = "titled"
	// OpPlugLog appends lines of the run's plug log (Data: their JSON,
	// one a line); a server before it refuses it as OpTitled.
	OpPlugLog Op = "plug_log"
	OpAppend  Op = "transcript_append"
	OpGet     Op = "persisted_get"
	OpSet     Op = "persisted_set"
	OpDelete  Op = "persisted_delete"
	OpIDs     Op = "persisted_ids"
	OpPlug    Op = "persisted_plug"
	// OpResync begins the calls a run sends again on a new store stream
	// (after a reconnection): it is not numbered and gets no answer.
	OpResync Op = "resync"
	// maxData bounds a call's data: a persisted value, which may be large,
	// or an append, which holds whole lines and is cut where it would be
	// longer than appendSize, unless one line alone is.
	maxData = acp.MaxRecordLine
)

// request is one call, one JSON object per line.
type request struct {
	ID       uint64                 `json:"id"`
	Op       Op                     `json:"op"`
	Session  string                 `json:"session"`
	PlugID   string                 `json:"plug_id,omitempty"`
	PlugName string                 `json:"plug_name,omitempty"`
	Size     int                    `json:"size,omitempty"` // of Data, which follows the line
	Data     []byte                 `json:"-"`
	Deflated bool                   `json:"deflated,omitempty"` // an append's Data: its lines deflated, as earlier runners sent them
	Loaded   *lifecycle.Loaded      `json:"loaded,omitempty"`
	Pause    *lifecycle.PauseRecord `json:"pause,omitempty"`
	// Failure, of a torn_down, is why the teardown failed; of an append,
	// why the run could not send its lines (the server refuses it); of an
	// OpResync, the failure of an earlier append of the run, which a server
	// that restarted does not know of.
	Failure string    `json:"failure,omitempty"`
	Title   string    `json:"title,omitempty"` // of an OpTitled
	At      time.Time `json:"at,omitzero"`
	// Answered is the number of the last call whose answer the run has
	// read: the server forgets the answers up to it.
	Answered uint64 `json:"answered,omitempty"`
	// Resync, of an OpResync, is the generation of the store stream it
	// begins (the runner's notice); Sent the number of the last call sent
	// before it.
	Resync uint64 `json:"resync,omitempty"`
	Sent   uint64 `json:"sent,omitempty"`
	// frame is the buffer Data was read into, on the server's side.
	frame []byte
	// carried: an append whose lines carry messages toward the client
	// (CarriedTranscript), sent also after an append failed.
	carried bool
	// parts, of an append, follow Data, which they are sent with.
	parts [][]byte
	// On the server's side, of a carried append whose lines were
	// forwarded: the buffer of the records to store when some lines are
	// not, and what was wrong with its lines.
	forwarded bool
	stored    []byte
	refused   error
}

// response answers the request with the same id.
type response struct {
	ID       uint64            `json:"id"`
	Error    string            `json:"error,omitempty"`
	NotFound bool              `json:"not_found,omitempty"`
	Record   *lifecycle.Record `json:"record,omitempty"`
	Size     int               `json:"size,omitempty"` // of Data, which follows the line
	Data     []byte            `json:"-"`
	OK       bool              `json:"ok,omitempty"`
	IDs      []string          `json:"ids,omitempty"`
	Name     string            `json:"name,omitempty"`
	// Resync, not 0, makes the line the runner's notice of a new store
	// stream of that generation, not an answer (ID 0): the run sends again
	// every call not answered yet, after an OpResync.
	Resync uint64 `json:"resync,omitempty"`
}

// Client is a session.RunStore over a connection. Calls are sent one at a
// time and answered in order. Transcript appends do not wait for their
// answers (see Transcript); every other call waits for its own, which
// comes after those of the appends before it.
//
// A call is kept, with its data, until it is answered. When the runner
// says that the run's store stream is a new one (a notice: its connection
// to the server broke, or the server restarted), the client sends again,
// in order, every call not answered yet, after an OpResync; the server
// answers a call it applied already without applying it again.
//
// A call is written under wmu, not mu: receive takes mu to hand over each
// answer, and must go on while a large call is written, or a server that
// writes a large answer and a client that writes a large call would wait
// for each other. The order of locking is wmu, then mu.
type Client struct {
	wmu sync.Mutex
	w   *bufio.Writer // empty whenever wmu is free
	raw io.Writer     // under w: a large call's data goes straight to it

	mu       sync.Mutex
	answered sync.Cond // an append was answered, or the connection broke
	next     uint64
	err      error      // the connection broke: every later call fails
	waiting  []*pending // the calls sent and not answered yet, in order
	appends  int        // of them, the appends
	blocked  int        // appends waiting for one of them to be answered
	failed   error      // of an append: every later write of the run fails with it
	answer   uint64     // the number of the last call answered
	resynced uint64     // the generation of the last notice whose calls were sent again
	spare    spares     // for the bytes of the next appends
}

// spares are the buffers of appends answered, for the next ones, on
// either side of a store stream: a fresh buffer costs its pages' faults
// and clearing, and a stream's appends come many at a time.
type spares struct {
	bufs  [][]byte
	bytes int // their capacities
}

// spares keep buffers of spareMin to spareMax bytes, spareBytes in all:
// those of a stream's appends in flight.
const (
	spareMin   = 4 << 10
	spareMax   = 4 << 20
	spareBytes = 8 << 20
)

// take returns an empty spare of capacity n or more, the last kept if
// several are; nil if none is.
func (s *spares) take(n int) []byte {
	for i := len(s.bufs) - 1; i >= 0; i-- {
		if b := s.bufs[i]; cap(b) >= n {
			s.bufs = slices.Delete(s.bufs, i, i+1)
			s.bytes -= cap(b)
			return b[:0]
		}
	}
	return nil
}

// get is take(n), or a new buffer with room for n bytes, rounded up to a
// power of two that spares can keep, so that it serves appends of other
// sizes once it is put back.
func (s *spares) get(n int) []byte {
	if b := s.take(n); b != nil {
		return b
	}
	size := max(n, spareMin)
	if r := 1 << bits.Len(uint(size-1)); r <= spareMax {
		size = r
	}
	return make([]byte, 0, size)
}

// put keeps b, whose bytes are no longer needed, if it is of the size of
// a stream's appends and there is room.
func (s *spares) put(b []byte) {
	if cap(b) >= spareMin && cap(b) <= spareMax && s.bytes+cap(b) <= spareBytes {
		s.bufs = append(s.bufs, b)
		s.bytes += cap(b)
	}
}

// pending is a call sent: done gets its answer, or is nil for an append.
// data is the call's, kept to be sent again.
type pending struct {
	req  request
	data []byte
	done chan answer
}

type answer struct {
	resp response
	err  error
}

// maxUnanswered bounds the appends in flight: past it, an append waits for
// the answer of the oldest, so that a store that falls behind slows the
// run down instead of queueing without end.
const maxUnanswered = 64

var _ lifecycle.RunStore = (*Client)(nil)

// NewClient returns a client over rw; it reads the answers until rw ends.
func NewClient(rw io.ReadWriter) *Client {
	c := &Client{w: bufio.NewWriterSize(rw, 64<<10), raw: rw}
	c.answered.L = &c.mu
	// Ends with rw's stream, which the client's owner closes.
	go c.receive(bufio.NewReaderSize(rw, 64<<10))
	return c
}

// writeFrame writes v as a line, then data, raw: a transcript's bytes or a
// plug's state cost no JSON encoding.
func writeFrame(w *bufio.Writer, v any, data []byte) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Write(line)
	w.WriteByte('\n')
	_, err = w.Write(data)
	return err
}

// send writes req as the next call, whose answer done gets (nil: an
// append, which waits while maxUnanswered appends are in flight). A write
// (a report, a persisted write, an append) fails once an append failed,
// so that a store never applies it as if the lines before it were
// committed. c.mu is not held.
//
// An append waits for a free slot without holding wmu: after a new store
// stream's notice, the answers that free one come only once resend, which
// takes wmu, has sent the calls again.
func (c *Client) send(req request, done chan answer) error {
	for {
		c.mu.Lock()
		for done == nil && c.appends >= maxUnanswered && c.err == nil {
			c.blocked++
			c.answered.Wait()
			c.blocked--
		}
		c.mu.Unlock()
		c.wmu.Lock()
		c.mu.Lock()
		if done != nil || c.appends < maxUnanswered || c.err != nil {
			break
		}
		// Another call took the slot meanwhile.
		c.mu.Unlock()
		c.wmu.Unlock()
	}
	defer c.wmu.Unlock()
	if c.err != nil {
		defer c.mu.Unlock()
		return c.err
	}
	if c.failed != nil && req.Op.writes() && !req.carried {
		defer c.mu.Unlock()
		if req.Op != OpAppend {
			return fmt.Errorf("%s refused: %w", req.Op, c.failed)
		}
		return c.failed
	}
	c.next++
	data := req.Data
	if done == nil {
		// The writer may reuse the bytes once the append is sent; they are
		// kept until the append is answered, to be sent again.
		n := len(data)
		for _, p := range req.parts {
			n += len(p)
		}
		data = append(c.spare.get(n), data...)
		for _, p := range req.parts {
			data = append(data, p...)
		}
	}
	req.Data, req.parts = nil, nil
	req.ID, req.Size, req.Answered = c.next, len(data), c.answer
	p := &pending{req, data, done}
	c.waiting = append(c.waiting, p)
	if done == nil {
		c.appends++
	}
	c.mu.Unlock()

	err := c.writeCall(req, data)
	if err == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Not sent whole: the call fails here rather than as an append's
	// failure to come.
	if n := len(c.waiting); n > 0 && c.waiting[n-1] == p {
		c.waiting = c.waiting[:n-1]
		if done == nil {
			c.appends--
		}
	}
	c.fail(fmt.Errorf("store: %w", err))
	return c.err
}

// writeCall writes a call and its data, with wmu held. Large data is not
// copied into w: the line and the data go out together (writev, where
// the connection is a socket).
func (c *Client) writeCall(req request, data []byte) error {
	if len(data) < largeData {
		if err := writeFrame(c.w, req, data); err != nil {
			return err
		}
		return c.w.Flush()
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	bufs := net.Buffers{append(line, '\n'), data}
	_, err = bufs.WriteTo(c.raw)
	return err
}

// largeData is the size from which a call's data is not copied.
const largeData = 16 << 10

// writes tells the calls that change the store from those that read it.
func (op Op) writes() bool {
	switch op {
	case OpSession, OpGet, OpIDs, OpPlug:
		return false
	}
	return true
}

// fail breaks the connection: the calls waiting and every later one get
// err; c.mu is held.
func (c *Client) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	if c.appends > 0 && c.failed == nil {
		c.failed = fmt.Errorf("store: transcript: %w", c.err)
	}
	for _, p := range c.waiting {
		if p.done != nil {
			p.done <- answer{err: c.err}
		}
	}
	c.waiting, c.appends = nil, 0
	c.answered.Broadcast()
}

// receive reads the answers, in the order of the calls, until the
// connection ends.
func (c *Client) receive(r *bufio.Reader) {
	for {
		var resp response
		data, err := readData(r, &resp, func() int { return resp.Size })
		if err == nil && resp.ID == 0 && resp.Resync != 0 {
			// A new store stream: what was not answered is sent again, by
			// another goroutine, since answers must go on being read while
			// a large call is written.
			// Ends once the calls are written, or the stream fails.
			go c.resend(resp.Resync)
			continue
		}
		c.mu.Lock()
		if err == nil && len(c.waiting) == 0 {
			err = fmt.Errorf("an answer to call %d, which is not waiting", resp.ID)
		}
		if err != nil {
			if err == io.EOF {
				c.fail(errors.New("store: the connection ended"))
			} else {
				c.fail(fmt.Errorf("store: an answer: %w", err))
			}
			c.mu.Unlock()
			return
		}
		p := c.waiting[0]
		if resp.ID != p.req.ID {
			c.fail(fmt.Errorf("store: the answer to call %d came for call %d", p.req.ID, resp.ID))
			c.mu.Unlock()
			return
		}
		c.waiting = c.waiting[1:]
		c.answer = resp.ID
		resp.Data = data
		err = resp.err(p.req)
		if p.done != nil {
			p.done <- answer{resp, err}
		} else {
			c.appends--
			if err != nil && c.failed == nil {
				c.failed = fmt.Errorf("store: transcript: %w", err)
			}
			// The server answers a call once it has read it whole: no
			// write of it is under way.
			c.spare.put(p.data)
			c.answered.Broadcast()
		}
		c.mu.Unlock()
	}
}

// resend sends again, after an OpResync of generation gen, every call not
// answered yet, in order, on the store stream the runner's notice of gen
// announced. A notice older than one whose calls were sent again is
// stale: its stream is gone already.
func (c *Client) resend(gen uint64) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.err != nil || gen <= c.resynced {
		c.mu.Unlock()
		return
	}
	c.resynced = gen
	if r, ok := c.raw.(*Redialer); ok {
		r.resume(gen)
	}
	again := slices.Clone(c.waiting)
	mark := request{Op: OpResync, Resync: gen, Answered: c.answer, Sent: c.next}
	if c.failed != nil {
		// A server that restarted knows it from here: it stores no more.
		mark.Failure = c.failed.Error()
	}
	c.mu.Unlock()
	err := writeFrame(c.w, mark, nil)
	for _, p := range again {
		if err != nil {
			break
		}
		req := p.req
		req.Answered = mark.Answered
		err = writeFrame(c.w, req, p.data)
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.mu.Lock()
		c.fail(fmt.Errorf("store: sending calls again: %w", err))
		c.mu.Unlock()
	}
}

// err is the error the store answered to req.
func (resp response) err(req request) error {
	switch {
	case resp.NotFound:
		return fmt.Errorf("session %s: %w", req.Session, lifecycle.ErrNotFound)
	case resp.Error != "":
		return errors.New(resp.Error)
	}
	return nil
}

// call sends req once ctx allows and waits for its answer: a call sent is
// the server's to apply, and its answer comes, or the connection's end.
func (c *Client) call(ctx context.Context, req request) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, err
	}
	done := make(chan answer, 1)
	if err := c.send(req, done); err != nil {
		return response{}, err
	}
	a := <-done
	return a.resp, a.err
}

func (c *Client) Session(ctx context.Context, id string) (*lifecycle.Record, error) {
	resp, err := c.call(ctx, request{Op: OpSession, Session: id})
	return resp.Record, err
}

func (c *Client) Loaded(ctx context.Context, id string, l lifecycle.Loaded) error {
	_, err := c.call(ctx, request{Op: OpLoaded, Session: id, Loaded: &l})
	return err
}

func (c *Client) Titled(ctx context.Context, id, title string) error {
	_, err := c.call(ctx, request{Op: OpTitled, Session: id, Title: title})
	return err
}

// AppendPlugLog returns once the server has stored lines
// (lifecycle.PlugLogs).
func (c *Client) AppendPlugLog(ctx context.Context, id string, lines []lifecycle.PlugLogLine) error {
	var data []byte
	for i := range lines {
		b, err := json.Marshal(&lines[i])
		if err != nil {
			return err
		}
		data = append(append(data, b...), '\n')
	}
	_, err := c.call(ctx, request{Op: OpPlugLog, Session: id, Data: data})
	return err
}

func (c *Client) Paused(ctx context.Context, id string, p lifecycle.PauseRecord) (*lifecycle.Record, error) {
	resp, err := c.call(ctx, request{Op: OpPaused, Session: id, Pause: &p})
	return resp.Record, err
}

func (c *Client) TornDown(ctx context.Context, id string, failure error, at time.Time) (*lifecycle.Record, error) {
	req := request{Op: OpTornDown, Session: id, At: at}
	if failure != nil {
		req.Failure = failure.Error()
		if req.Failure == "" {
			req.Failure = "teardown failed"
		}
	}
	resp, err := c.call(ctx, req)
	return resp.Record, err
}

// Transcript appends what is written to the session's transcript. A
// Write returns once its lines are sent: the store commits them, and
// answers, while the run goes on. The store takes calls in order, so every
// line written before a report or a persisted write is committed before
// that call is applied. Close waits for the answers of every append. Once
// an append failed, the next Write, Close, and every later report or
// persisted write of the run fail with that failure: the store applies no
// report after a transcript line it lost.
func (c *Client) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	return &transcript{c: c, id: id}, nil
}

// CarriedTranscript is Transcript for lines that also carry the run's
// messages toward the client (acp.Carrier), which the server sends on: its
// appends go on after one failed, since the server still sends their
// messages on without storing them. Only Close tells of the failure.
func (c *Client) CarriedTranscript(ctx context.Context, id string) (io.WriteCloser, error) {
	return &transcript{c: c, id: id, carried: true}, nil
}

type transcript struct {
	c       *Client
	id      string
	carried bool
}

// appendSize is how much of a transcript's lines an append takes at most,
// unless one line alone is longer: a larger write is cut at its lines, so
// that an append never exceeds what the server reads (maxData), however
// many lines a batch gathered.
const appendSize = 4 << 20

func (t *transcript) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		lines := leadingLines(rest, appendSize)
		if err := t.append(request{Data: lines}); err != nil {
			return len(p) - len(rest), err
		}
		rest = rest[len(lines):]
	}
	return len(p), nil
}

// WriteBuffers is Write of bufs, one after the other: an acp.Writer gives
// its batches so, and they are copied once, into the append.
func (t *transcript) WriteBuffers(bufs [][]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n > appendSize {
		// Rare, and cut at its lines: a backlog, or a huge message.
		_, err := t.Write(bytes.Join(bufs, nil))
		return err
	}
	return t.append(request{parts: bufs})
}

// append sends lines, given as req's Data or parts, in one append. A line
// longer than the server takes is not sent: an append that says so
// (Failure) is, which the server refuses as a failed append, so that it
// stores none of the run's lines from there on, as after any failed
// append. The message a carried record holds still goes to the client,
// alone, when it fits.
func (t *transcript) append(req request) error {
	req.Op, req.Session, req.carried = OpAppend, t.id, t.carried
	if n := len(req.Data); n > maxData {
		if t.carried {
			line := bytes.TrimSuffix(req.Data, newline)
			if _, msg, err := acp.CarriedLine(line); err == nil && msg != nil && len(msg)+2 <= maxData {
				if err := t.append(request{parts: [][]byte{{acp.CarriedForward}, msg, newline}}); err != nil {
					return err
				}
			}
		}
		req.Data = nil
		req.Failure = fmt.Sprintf("a line of %d bytes (at most %d) was not sent", n, maxData)
	}
	return t.c.send(req, nil)
}

var newline = []byte{'\n'}

// leadingLines is the start of p made of its lines that fit in size
// bytes, or its first line when that alone is longer, or p when it has
// no line break.
func leadingLines(p []byte, size int) []byte {
	if len(p) <= size {
		return p
	}
	if i := bytes.LastIndexByte(p[:size], '\n'); i >= 0 {
		return p[:i+1]
	}
	if i := bytes.IndexByte(p[size:], '\n'); i >= 0 {
		return p[:size+i+1]
	}
	return p
}

func (t *transcript) Close() error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.appends > 0 {
		c.answered.Wait()
	}
	return c.failed
}

func (c *Client) Persisted() lifecycle.Persisted { return persisted{c} }

func (c *Client) PersistedIDs(ctx context.Context, id string) ([]string, error) {
	resp, err := c.call(ctx, request{Op: OpIDs, Session: id})
	return resp.IDs, err
}

func (c *Client) PersistedPlug(ctx context.Context, id, plugID string) (string, bool, error) {
	resp, err := c.call(ctx, request{Op: OpPlug, Session: id, PlugID: plugID})
	return resp.Name, resp.OK, err
}

type persisted struct{ c *Client }

func (p persisted) Get(ctx context.Context, id, plugID string) ([]byte, bool, error) {
	resp, err := p.c.call(ctx, request{Op: OpGet, Session: id, PlugID: plugID})
	return resp.Data, resp.OK, err
}

// Set returns once the server has committed the write.
func (p persisted) Set(ctx context.Context, id, plugID, plugName string, data []byte) error {
	_, err := p.c.call(ctx, request{Op: OpSet, Session: id, PlugID: plugID, PlugName: plugName, Data: data})
	return err
}

func (p persisted) Delete(ctx context.Context, id, plugID string) error {
	_, err := p.c.call(ctx, request{Op: OpDelete, Session: id, PlugID: plugID})
	return err
}
