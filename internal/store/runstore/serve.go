package runstore

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/klauspost/compress/flate"
)

// Server answers a run's calls from Store, for Session only. It serves
// the run's store streams one after the other (Serve), across
// reconnections: a call sent again on a new stream gets the answer it got
// and is not applied twice (L7).
type Server struct {
	Store   lifecycle.RunStore
	Session string
	// Run is the run's number in its session: a transcript that keeps the
	// numbers of the calls that appended its lines (session.CallTranscripts)
	// keeps it with them, and a report sent again after a restart is told
	// by the run's history.
	Run int
	// Parent, when set, is the session a fork's start run was forked
	// from: the run may read its persisted state (ctx.persisted.parent),
	// and nothing else of it.
	Parent string
	// MayWrite, when set, says whether the run may still write: a run the
	// control plane has failed may not (its late writes are refused).
	MayWrite func(context.Context) error
	// Forward, when set, receives the lines of the run's appends, whose
	// records carry its messages toward the client (runner protocol 4,
	// acp.Carrier), as each append is read and before it is committed;
	// its reader takes the messages out (acp.NewCarriedReader). The
	// records are what is stored. Once an append failed, those after it
	// are still forwarded, not stored. An error of Forward (its reader
	// gone) drops the lines.
	Forward io.Writer

	serving    sync.Mutex // held by Serve: one stream at a time; guards what follows
	transcript io.WriteCloser
	// Once an append failed, the run's transcript misses lines: no later
	// write is applied, so that every line before a report is committed
	// when the report is (L7).
	lost error
	// applied is the number of the last call applied, or, after a resync
	// on a server that applied nothing, of the last one the run had the
	// answer of.
	applied uint64
	kept    []kept // the answers of the calls applied whose answers the run may not have read, in order
	// doubt: the calls up to it may have been applied by a server before
	// this one, which restarted: appends are told by the transcript's last
	// call (appended, once read), reports by the run's history.
	doubt        uint64
	appended     uint64
	appendedRead bool
	seed         maphash.Seed
	// frames are the buffers of appends answered, for the next calls
	// read, and joint the buffer of a batch's data.
	frames spares
	joint  []byte
	// framesMu guards frames, which Serve takes from as it reads and the
	// committer gives back to.
	framesMu sync.Mutex
}

// kept is the answer of a call, and what the call was (its sum), so that
// a call sent again under that number with something else is refused. A
// read's answer is not kept (its data may be 65 MiB): a read sent again
// is read again.
type kept struct {
	sum  uint64
	id   uint64
	read bool
	resp response // of a write
}

// maxKept bounds the answers kept for a run that has not said it read
// them: a run has at most maxUnanswered appends and a call or so of each
// of its goroutines in flight, and one that never says is refused rather
// than kept in memory without end.
const maxKept = 1024

// maxBatch bounds the bytes of the appends committed together.
const maxBatch = 4 << 20

// ErrBroken is in the error of a Serve whose run's calls break the
// protocol (a bad or too long line, a call out of order or missing,
// answers never said read): its store cannot go on, unlike one whose
// stream was only cut, which the run sends again on the next.
var ErrBroken = errors.New("store: the run's calls are broken")

// ErrTranscriptClose is the error of a Serve whose run closed its store
// stream, and whose transcript then failed to close: a last line the run
// left without a newline may be lost. Nothing else is.
var ErrTranscriptClose = errors.New("store: closing the run's transcript")

// Serve answers calls on rw, one of the run's store streams, until it
// ends; its error is nil when the run closed it (ErrTranscriptClose when
// its transcript then failed to close). A new stream of the run
// begins with an OpResync, after which the run sends again the calls it
// has no answer of.
//
// The appends that come in order are committed by a goroutine of their
// own (committer), which commits those that arrived meanwhile together,
// while their messages (Forward) go on at once: a message toward the
// client never waits for a commit. Any other call waits until the
// appends before it are committed, and is answered after them.
func (s *Server) Serve(ctx context.Context, rw io.ReadWriter) error {
	s.serving.Lock()
	defer s.serving.Unlock()
	if s.seed == (maphash.Seed{}) {
		s.seed = maphash.MakeSeed()
	}
	r, w := bufio.NewReaderSize(rw, 64<<10), bufio.NewWriterSize(rw, 64<<10)
	c := s.startCommitter(ctx, w)
	defer c.stop()
	var prev uint64       // the number of the last call of this stream
	accepted := s.applied // the number of the last call applied or given to c
	var held *request     // read while gathering appends, not answered yet
	for {
		req := held
		held = nil
		if req == nil {
			var err error
			if req, err = s.readCall(r); err == io.EOF {
				if err := c.drain(); err != nil {
					return err
				}
				if err := s.closeTranscript(); err != nil {
					return fmt.Errorf("%w: %w", ErrTranscriptClose, err)
				}
				return nil
			} else if err != nil {
				_ = c.drain()
				return err
			}
		}
		if req.Op == OpAppend && req.Session == s.Session && req.ID != 0 && req.ID == accepted+1 && req.ID > s.doubt {
			s.carry(req)
			if err := c.add(req); err != nil {
				return err
			}
			prev, accepted = req.ID, req.ID
			continue
		}
		if err := c.drain(); err != nil {
			return err
		}
		var err error
		held, err = s.serveCall(ctx, r, w, req, &prev)
		accepted = s.applied
		if err != nil {
			return err
		}
	}
}

// serveCall applies req, with the appends read after it when it is one,
// and answers; the committer is idle. It returns the call read after a
// batch of appends, if it read one.
func (s *Server) serveCall(ctx context.Context, r *bufio.Reader, w *bufio.Writer, req *request, prev *uint64) (*request, error) {
	if req.Op == OpResync {
		s.resync(req)
		*prev = 0
		return nil, nil
	}
	s.forget(req.Answered)
	if req.ID != 0 {
		switch {
		case req.ID > s.applied && len(s.kept) >= maxKept:
			return nil, fmt.Errorf("%w: call %d: the answers of %d calls are not read (answered %d): at most %d", ErrBroken, req.ID, len(s.kept), req.Answered, maxKept)
		case req.ID < *prev:
			return nil, fmt.Errorf("%w: call %d after call %d: calls must come in order", ErrBroken, req.ID, *prev)
		case req.ID <= s.applied:
			// Delivered again (the same call on this stream, or sent
			// again on a new one): answered as before, not applied.
			*prev = req.ID
			return nil, writeAnswer(w, s.again(ctx, req))
		case req.ID != s.applied+1:
			return nil, fmt.Errorf("%w: call %d after call %d: calls %d to %d are missing", ErrBroken, req.ID, s.applied, s.applied+1, req.ID-1)
		}
	}
	batch := []*request{req}
	var held *request
	var readErr error
	if req.Op == OpAppend && req.Session == s.Session {
		// The appends that came while the last commit was under way
		// (the run does not wait for their answers) are here already:
		// they are committed together, with one write.
		held, readErr = s.gather(r, &batch)
	}
	var resps []response
	switch {
	case req.Op == OpAppend && req.Session == s.Session:
		resps = s.appendBatch(ctx, batch)
	case s.lost != nil && req.Op.writes():
		resps = answers(batch, s.lost)
	default:
		resps = []response{s.apply(ctx, req)}
	}
	if id := batch[len(batch)-1].ID; id != 0 {
		*prev = id
	}
	if err := s.answerBatch(w, batch, resps); err != nil {
		return nil, err
	}
	return held, readErr
}

// answerBatch answers the calls of batch, applied, with resps, and keeps
// the answers until the run has read them.
func (s *Server) answerBatch(w *bufio.Writer, batch []*request, resps []response) error {
	for i, resp := range resps {
		if batch[i].Op == OpAppend && resp.Error != "" {
			s.loseLines(resp.Error)
		}
		writeFrame(w, resp, resp.Data)
		s.keep(batch[i], resp)
		s.recycle(batch[i])
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Close closes the run's transcript, once its last stream is served.
func (s *Server) Close() error {
	s.serving.Lock()
	defer s.serving.Unlock()
	return s.closeTranscript()
}

func (s *Server) closeTranscript() error {
	if s.transcript == nil {
		return nil
	}
	err := s.transcript.Close()
	s.transcript = nil
	return err
}

// resync begins a new stream of the run. A server that applied nothing of
// the run may be one that restarted: the calls the run sent before the
// resync and has no answer of may have been applied by the server before.
func (s *Server) resync(req *request) {
	if s.applied == 0 && len(s.kept) == 0 && s.lost == nil {
		s.applied = req.Answered
		if req.Sent > req.Answered {
			s.doubt = req.Sent
		}
	}
	if req.Failure != "" {
		s.loseLines(req.Failure)
	}
	s.forget(req.Answered)
}

// loseLines records that an append of the run failed (why), unless one
// did before: the run's transcript misses lines from there.
func (s *Server) loseLines(why string) {
	if s.lost == nil {
		s.lost = fmt.Errorf("store: a transcript append failed before (%s): the run's writes are refused", why)
	}
}

// forget drops the answers the run has read, up to call n.
func (s *Server) forget(n uint64) {
	i := 0
	for i < len(s.kept) && s.kept[i].id <= n {
		i++
	}
	if i > 0 {
		s.kept = slices.Delete(s.kept, 0, i)
	}
}

// keep keeps the answer of a numbered call until the run has read it.
func (s *Server) keep(req *request, resp response) {
	if req.ID == 0 {
		return
	}
	s.applied = req.ID
	k := kept{sum: s.sum(req), id: req.ID, read: !req.Op.writes()}
	if !k.read {
		k.resp = resp
	}
	s.kept = append(s.kept, k)
}

// again answers a call applied before: as it was answered, if it is the
// same call; a read is read again.
func (s *Server) again(ctx context.Context, req *request) response {
	for _, k := range s.kept {
		if k.id != req.ID {
			continue
		}
		if k.sum != s.sum(req) {
			return response{ID: req.ID, Error: fmt.Sprintf("store: call %d (%s, %d bytes) sent again is not the call %d applied: refused", req.ID, req.Op, len(req.Data), req.ID)}
		}
		if k.read {
			return s.apply(ctx, req)
		}
		return k.resp
	}
	return response{ID: req.ID, Error: fmt.Sprintf("store: call %d (%s) sent again after its answer was read: refused", req.ID, req.Op)}
}

// sum sums what a call asks for: its line but for its number and the
// answers read, and its data.
func (s *Server) sum(req *request) uint64 {
	head := *req
	head.ID, head.Answered, head.Data = 0, 0, nil
	line, _ := json.Marshal(head)
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.Write(line)
	h.Write(req.Data)
	return h.Sum64()
}

// readCall reads the next call, into a spare buffer if there is one;
// io.EOF when the run closed the connection.
func (s *Server) readCall(r *bufio.Reader) (*request, error) {
	var req request
	frame, n, err := readFrame(r, &req, func() int { return req.Size }, func(n int) []byte {
		s.framesMu.Lock()
		defer s.framesMu.Unlock()
		return s.frames.get(n)
	})
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("store: a bad call: %w", err)
	}
	req.frame = frame
	if n < len(frame) {
		req.Data = frame[n:len(frame):len(frame)]
	}
	return &req, nil
}

// recycle keeps the buffer of an append answered for the next calls
// read; a transcript keeps none of the bytes written to it.
func (s *Server) recycle(req *request) {
	if req.Op == OpAppend {
		s.framesMu.Lock()
		s.frames.put(req.frame)
		s.framesMu.Unlock()
	}
	req.frame, req.Data, req.stored = nil, nil, nil
}

// gather adds to batch the appends of the same session that follow it and
// are read already, in order and up to maxBatch bytes. It returns the call
// after them, if it read one, and an error of the connection, which ends it
// once the batch is answered.
func (s *Server) gather(r *bufio.Reader, batch *[]*request) (*request, error) {
	first := (*batch)[0]
	size := len(first.Data)
	for r.Buffered() > 0 && size < maxBatch && len(*batch)+len(s.kept) < maxKept {
		next, err := s.readCall(r)
		if err != nil {
			return nil, err
		}
		prev := (*batch)[len(*batch)-1]
		if next.Op != OpAppend || next.Session != first.Session || next.ID != prev.ID+1 || prev.ID == 0 {
			return next, nil
		}
		s.forget(next.Answered)
		*batch = append(*batch, next)
		size += len(next.Data)
	}
	return nil, nil
}

// writeAnswer writes an answer and sends it.
func writeAnswer(w *bufio.Writer, resp response) error {
	writeFrame(w, resp, resp.Data)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// apply applies one call and returns its answer.
func (s *Server) apply(ctx context.Context, req *request) response {
	resp := response{ID: req.ID}
	setError(&resp, s.answer(ctx, req, &resp))
	resp.Size = len(resp.Data)
	return resp
}

func setError(resp *response, err error) {
	if errors.Is(err, lifecycle.ErrNotFound) {
		resp.NotFound = true
	} else if err != nil {
		resp.Error = err.Error()
	}
}

// appendBatch appends the lines of appends of the run's session, in
// order, in one write (those sent deflated inflated first), so that the
// store keeps them in one chunk with the number of the last. An append a
// server before this one committed (doubt) is answered, not written
// again. An append refused (its lines cut short, or lost by the run)
// fails, with every append after it, and those before it are written;
// on an error of the store nothing of the batch is. The lines of the
// appends are forwarded first, as Serve forwards those it reads in order,
// whatever comes of their commit: the run goes on without its transcript
// once an append failed (s.lost).
func (s *Server) appendBatch(ctx context.Context, batch []*request) []response {
	var err error
	if s.MayWrite != nil {
		err = s.MayWrite(ctx)
	}
	if err == nil && s.lost == nil {
		err = s.openTranscript(ctx)
	}
	rest := batch
	if rest[0].ID <= s.doubt {
		// When the store cannot tell, none is taken as committed: a
		// message is rather forwarded twice than lost.
		done, derr := s.appendedBefore(ctx)
		err = cmp.Or(err, derr)
		for len(rest) > 0 && rest[0].ID <= done {
			rest = rest[1:]
		}
	}
	good := len(rest) // the appends before the first refused
	var refused error
	for i, req := range rest {
		s.carry(req)
		var rerr error
		switch {
		case req.refused != nil:
			rerr = fmt.Errorf("call %d: %w", req.ID, req.refused)
		case req.Failure != "":
			rerr = fmt.Errorf("call %d: the run lost lines: %s", req.ID, req.Failure)
		case req.Deflated && refused == nil:
			req.Data, rerr = inflate(req.Data)
			req.Deflated = false
		}
		if rerr != nil && refused == nil {
			good, refused = i, rerr
		}
	}
	if err = cmp.Or(err, s.lost); err == nil && good > 0 {
		// One write: the chunk the store keeps holds every call of the
		// batch, and the number of its last.
		lines := rest[:good]
		if numbered, ok := s.transcript.(lifecycle.CallTranscript); ok {
			numbered.Call(s.Run, lines[len(lines)-1].ID)
		}
		_, err = s.transcript.Write(s.joined(lines))
	}
	if cap(s.joint) > spareMax {
		s.joint = nil
	}
	cut := len(batch) - len(rest) + good
	return append(answers(batch[:cut], err), answers(batch[cut:], cmp.Or(err, refused))...)
}

// carry sends on, once, the lines of a carried append (Forward): the
// reader of Forward takes the messages out of their records. Its lines
// must be whole, or they would run into those of the next append.
func (s *Server) carry(req *request) {
	if s.Forward == nil || req.forwarded || req.Op != OpAppend {
		return
	}
	req.forwarded = true
	if req.Deflated {
		req.refused = errors.New("carried lines are sent as they are, not deflated")
		return
	}
	n := len(req.Data)
	if n == 0 {
		return // nothing to send on: a Forward that is a pipe would wait for its reader
	}
	if req.Data[n-1] != '\n' {
		req.refused = fmt.Errorf("carried lines end with a line break: the last %d bytes do not", n-1-bytes.LastIndexByte(req.Data, '\n'))
		return
	}
	_, _ = s.Forward.Write(req.Data)
}

// appendedBefore is the number of the last call of the run whose lines
// the transcript holds, as the store keeps it; 0 for a store that keeps no
// call numbers.
func (s *Server) appendedBefore(ctx context.Context) (uint64, error) {
	if s.appendedRead {
		return s.appended, nil
	}
	calls, ok := s.Store.(lifecycle.CallTranscripts)
	if !ok {
		return 0, nil
	}
	n, err := calls.TranscriptCall(ctx, s.Session, s.Run)
	if err != nil {
		return 0, fmt.Errorf("store: which appends of run %d the transcript holds: %w", s.Run, err)
	}
	s.appended, s.appendedRead = n, true
	return n, nil
}

// lines are the lines of an append to store: its records, when it
// carried messages.
func (req *request) lines() []byte {
	if req.forwarded {
		return storedLines(req.Data, &req.stored)
	}
	return req.Data
}

// joined is the lines of calls, one after the other, in s.joint.
func (s *Server) joined(calls []*request) []byte {
	if len(calls) == 1 {
		return calls[0].lines()
	}
	s.joint = s.joint[:0]
	for _, req := range calls {
		s.joint = append(s.joint, req.lines()...)
	}
	return s.joint
}

// inflate returns the lines of an append a run sent deflated, deflate
// streams one after the other, as earlier runners sent the bulk of a
// transcript: at most maxData bytes in all, as an append sent as it is.
func inflate(packed []byte) ([]byte, error) {
	var lines bytes.Buffer
	src := bytes.NewReader(packed)
	for src.Len() > 0 {
		r := flate.NewReader(src) // it reads src to the stream's end, not past
		left := int64(maxData - lines.Len())
		n, err := lines.ReadFrom(io.LimitReader(r, left+1))
		switch {
		case err != nil:
			return nil, fmt.Errorf("deflated lines that do not inflate: %w", err)
		case n > left:
			return nil, fmt.Errorf("deflated lines of more than %d bytes", maxData)
		}
	}
	return lines.Bytes(), nil
}

// answers answers each call of batch with err.
func answers(batch []*request, err error) []response {
	resps := make([]response, len(batch))
	for i, req := range batch {
		resps[i].ID = req.ID
		setError(&resps[i], err)
	}
	return resps
}

func (s *Server) openTranscript(ctx context.Context) error {
	if s.transcript != nil {
		return nil
	}
	var err error
	s.transcript, err = s.Store.Transcript(ctx, s.Session)
	return err
}

func (s *Server) answer(ctx context.Context, req *request, resp *response) error {
	if req.Session != s.Session {
		if req.Op == OpGet && s.Parent != "" && req.Session == s.Parent {
			var err error
			resp.Data, resp.OK, err = s.Store.Persisted().Get(ctx, s.Parent, req.PlugID)
			return err
		}
		return fmt.Errorf("session %s: this run is of session %s", req.Session, s.Session)
	}
	if req.Op.writes() && s.MayWrite != nil {
		if err := s.MayWrite(ctx); err != nil {
			return err
		}
	}
	var err error
	switch req.Op {
	case OpSession:
		resp.Record, err = s.Store.Session(ctx, s.Session)
	case OpLoaded:
		if req.Loaded == nil {
			return errors.New("loaded: no report")
		}
		err = s.Store.Loaded(ctx, s.Session, *req.Loaded)
	case OpTitled:
		// The same title again changes nothing: no doubt to settle.
		err = s.Store.Titled(ctx, s.Session, req.Title)
	case OpPlugLog:
		err = s.appendPlugLog(ctx, req.Data)
	case OpPaused:
		if req.Pause == nil {
			return errors.New("paused: no pause")
		}
		if req.ID <= s.doubt {
			if rec, done, err := s.reported(ctx, func(h *lifecycle.RunRecord) bool { return h.Pause != nil }); err != nil || done {
				resp.Record = rec
				return err
			}
		}
		resp.Record, err = s.Store.Paused(ctx, s.Session, *req.Pause)
	case OpTornDown:
		if req.ID <= s.doubt {
			if rec, done, err := s.reported(ctx, func(h *lifecycle.RunRecord) bool { return h.Teardown != nil }); err != nil || done {
				resp.Record = rec
				return err
			}
		}
		var failure error
		if req.Failure != "" {
			failure = errors.New(req.Failure)
		}
		resp.Record, err = s.Store.TornDown(ctx, s.Session, failure, req.At)
	case OpGet:
		resp.Data, resp.OK, err = s.Store.Persisted().Get(ctx, s.Session, req.PlugID)
	case OpSet:
		err = s.Store.Persisted().Set(ctx, s.Session, req.PlugID, req.PlugName, req.Data)
	case OpDelete:
		err = s.Store.Persisted().Delete(ctx, s.Session, req.PlugID)
	case OpIDs:
		resp.IDs, err = s.Store.PersistedIDs(ctx, s.Session)
	case OpPlug:
		resp.Name, resp.OK, err = s.Store.PersistedPlug(ctx, s.Session, req.PlugID)
	default:
		return fmt.Errorf("store: unknown operation %q", req.Op)
	}
	return err
}

// appendPlugLog stores the lines of a plug_log's data, which must be the
// run's.
func (s *Server) appendPlugLog(ctx context.Context, data []byte) error {
	logs, ok := s.Store.(lifecycle.PlugLogs)
	if !ok {
		return fmt.Errorf("plug log: this store (%T) keeps none", s.Store)
	}
	var lines []lifecycle.PlugLogLine
	for line := range bytes.Lines(data) {
		var l lifecycle.PlugLogLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("plug log: a line is not a plug log line: %v", err)
		}
		if s.Run != 0 && l.Run != s.Run {
			return fmt.Errorf("plug log: a line of run %d from run %d", l.Run, s.Run)
		}
		lines = append(lines, l)
	}
	return logs.AppendPlugLog(ctx, s.Session, lines)
}

// reported tells a report of the run that a server before this one
// applied (doubt): the run's history has it (has). Its answer is then the
// record as it is.
func (s *Server) reported(ctx context.Context, has func(*lifecycle.RunRecord) bool) (*lifecycle.Record, bool, error) {
	rec, err := s.Store.Session(ctx, s.Session)
	if err != nil {
		return nil, false, err
	}
	for i := range rec.History {
		if h := &rec.History[i]; h.Run == s.Run && s.Run != 0 {
			return rec, has(h), nil
		}
	}
	return rec, false, nil
}
