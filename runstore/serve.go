package runstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/blaiseagent/blaise-agent/session"
	"github.com/klauspost/compress/flate"
)

// Server answers a run's calls from Store, for Session only.
type Server struct {
	Store   session.RunStore
	Session string
	// MayWrite, when set, says whether the run may still write: a run the
	// control plane has failed may not (its late writes are refused).
	MayWrite func() error
}

// maxBatch bounds the bytes of the appends committed together.
const maxBatch = 4 << 20

// Serve answers calls on rw until it ends; its error is nil when the run
// closed it.
func (s *Server) Serve(ctx context.Context, rw io.ReadWriter) error {
	r, w := bufio.NewReaderSize(rw, 64<<10), bufio.NewWriterSize(rw, 64<<10)
	var transcript io.WriteCloser
	// Calls are numbered: a call delivered again (the same number) gets the
	// answer it got the first time and is not applied twice (L7).
	var last response
	// Once an append failed, the run's transcript misses lines: no later
	// write is applied, so that every line before a report is committed
	// when the report is (L7).
	var lost error
	defer func() {
		if transcript != nil {
			transcript.Close()
		}
	}()
	var held *request // read while gathering appends, not answered yet
	for {
		req := held
		held = nil
		if req == nil {
			var err error
			if req, err = readCall(r); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
		if req.ID != 0 && req.ID == last.ID {
			if err := writeAnswer(w, last); err != nil {
				return err
			}
			continue
		}
		if req.ID != 0 && req.ID < last.ID {
			return fmt.Errorf("store: call %d after call %d: calls must come in order", req.ID, last.ID)
		}
		batch := []*request{req}
		var readErr error
		if req.Op == OpAppend && req.Session == s.Session {
			// The appends that came while the last commit was under way
			// (the run does not wait for their answers) are here already:
			// they are committed together (session.DeflatedTranscript
			// aside), with one write.
			held, readErr = gather(r, &batch)
		}
		var resps []response
		switch {
		case lost != nil && req.Op.writes():
			resps = answers(batch, lost)
		case req.Op == OpAppend && req.Session == s.Session:
			resps = s.appendBatch(batch, &transcript)
		default:
			resps = []response{s.apply(ctx, req)}
		}
		if req.Op == OpAppend && resps[0].Error != "" && lost == nil {
			lost = fmt.Errorf("store: a transcript append failed before (%s): the run's writes are refused", resps[0].Error)
		}
		for _, resp := range resps {
			writeFrame(w, resp, resp.Data)
		}
		last = resps[len(resps)-1]
		if err := w.Flush(); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if readErr != nil {
			return readErr
		}
	}
}

// readCall reads the next call; io.EOF when the run closed the connection.
func readCall(r *bufio.Reader) (*request, error) {
	var req request
	data, err := readFrame(r, &req, func() int { return req.Size })
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("store: a bad call: %w", err)
	}
	req.Data = data
	return &req, nil
}

// gather adds to batch the appends of the same session that follow it and
// are read already, in order and up to maxBatch bytes. It returns the call
// after them, if it read one, and an error of the connection, which ends it
// once the batch is answered.
func gather(r *bufio.Reader, batch *[]*request) (*request, error) {
	first := (*batch)[0]
	size := len(first.Data)
	for r.Buffered() > 0 && size < maxBatch {
		next, err := readCall(r)
		if err != nil {
			return nil, err
		}
		prev := (*batch)[len(*batch)-1]
		if next.Op != OpAppend || next.Session != first.Session || next.ID <= prev.ID {
			return next, nil
		}
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
	if errors.Is(err, session.ErrNotFound) {
		resp.NotFound = true
	} else if err != nil {
		resp.Error = err.Error()
	}
}

// appendBatch appends the lines of appends of the run's session, in
// order, in one write for each run of appends sent alike: as they are, or
// deflated (deflate streams one after the other). Each gets the answer of
// the batch: the first error, after which nothing more is written.
func (s *Server) appendBatch(batch []*request, transcript *io.WriteCloser) []response {
	var err error
	if s.MayWrite != nil {
		err = s.MayWrite()
	}
	if err == nil {
		err = s.openTranscript(transcript)
	}
	for rest := batch; len(rest) > 0 && err == nil; {
		deflated := rest[0].Deflated
		n := 1
		for n < len(rest) && rest[n].Deflated == deflated {
			n++
		}
		if deflated {
			err = appendDeflated(*transcript, joined(rest[:n]))
		} else {
			_, err = (*transcript).Write(joined(rest[:n]))
		}
		rest = rest[n:]
	}
	return answers(batch, err)
}

// joined is the data of calls, one after the other.
func joined(calls []*request) []byte {
	if len(calls) == 1 {
		return calls[0].Data
	}
	size := 0
	for _, req := range calls {
		size += len(req.Data)
	}
	data := make([]byte, 0, size)
	for _, req := range calls {
		data = append(data, req.Data...)
	}
	return data
}

// appendDeflated appends lines a run sent deflated, deflate streams one
// after the other: as they are to a transcript that keeps them so, else
// inflated (at most maxData bytes a stream, as an append sent as it is).
func appendDeflated(w io.Writer, packed []byte) error {
	if d, ok := w.(session.DeflatedTranscript); ok {
		return d.WriteDeflated(packed)
	}
	src := bytes.NewReader(packed)
	for src.Len() > 0 {
		r := flate.NewReader(src) // it reads src to the stream's end, not past
		lines, err := io.ReadAll(io.LimitReader(r, maxData+1))
		switch {
		case err != nil:
			return fmt.Errorf("deflated lines that do not inflate: %w", err)
		case len(lines) > maxData:
			return fmt.Errorf("deflated lines of more than %d bytes", maxData)
		}
		if _, err := w.Write(lines); err != nil {
			return err
		}
	}
	return nil
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

func (s *Server) openTranscript(transcript *io.WriteCloser) error {
	if *transcript != nil {
		return nil
	}
	var err error
	*transcript, err = s.Store.Transcript(s.Session)
	return err
}

func (s *Server) answer(ctx context.Context, req *request, resp *response) error {
	if req.Session != s.Session {
		return fmt.Errorf("session %s: this run is of session %s", req.Session, s.Session)
	}
	if req.Op.writes() && s.MayWrite != nil {
		if err := s.MayWrite(); err != nil {
			return err
		}
	}
	var err error
	switch req.Op {
	case OpSession:
		resp.Record, err = s.Store.Session(s.Session)
	case OpLoaded:
		if req.Loaded == nil {
			return errors.New("loaded: no report")
		}
		err = s.Store.Loaded(s.Session, *req.Loaded)
	case OpPaused:
		if req.Pause == nil {
			return errors.New("paused: no pause")
		}
		resp.Record, err = s.Store.Paused(s.Session, *req.Pause)
	case OpTornDown:
		var failure error
		if req.Failure != "" {
			failure = errors.New(req.Failure)
		}
		resp.Record, err = s.Store.TornDown(s.Session, failure, req.At)
	case OpGet:
		resp.Data, resp.OK, err = s.Store.Persisted().Get(ctx, s.Session, req.PlugID)
	case OpSet:
		err = s.Store.Persisted().Set(ctx, s.Session, req.PlugID, req.PlugName, req.Data)
	case OpDelete:
		err = s.Store.Persisted().Delete(ctx, s.Session, req.PlugID)
	case OpIDs:
		resp.IDs, err = s.Store.PersistedIDs(s.Session)
	case OpPlug:
		resp.Name, resp.OK, err = s.Store.PersistedPlug(s.Session, req.PlugID)
	default:
		return fmt.Errorf("store: unknown operation %q", req.Op)
	}
	return err
}
