package runstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/blaiseagent/blaise-agent/session"
)

// Server answers a run's calls from Store, for Session only.
type Server struct {
	Store   session.RunStore
	Session string
	// MayWrite, when set, says whether the run may still write: a run the
	// control plane has failed may not (its late writes are refused).
	MayWrite func() error
}

// Serve answers calls on rw until it ends; its error is nil when the run
// closed it.
func (s *Server) Serve(ctx context.Context, rw io.ReadWriter) error {
	r, w := bufio.NewReaderSize(rw, 64<<10), bufio.NewWriterSize(rw, 64<<10)
	var transcript io.WriteCloser
	// Calls are numbered: a call delivered again (the same number) gets the
	// answer it got the first time and is not applied twice (L7).
	var last response
	defer func() {
		if transcript != nil {
			transcript.Close()
		}
	}()
	for {
		var req request
		data, err := readFrame(r, &req, func() int { return req.Size })
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: a bad call: %w", err)
		}
		req.Data = data
		if req.ID != 0 && req.ID == last.ID {
			if err := writeFrame(w, last, last.Data); err != nil {
				return fmt.Errorf("store: %w", err)
			}
			continue
		}
		if req.ID != 0 && req.ID < last.ID {
			return fmt.Errorf("store: call %d after call %d: calls must come in order", req.ID, last.ID)
		}
		resp := response{ID: req.ID}
		err = s.answer(ctx, &req, &resp, &transcript)
		if errors.Is(err, session.ErrNotFound) {
			resp.NotFound = true
		} else if err != nil {
			resp.Error = err.Error()
		}
		resp.Size = len(resp.Data)
		last = resp
		if err := writeFrame(w, resp, resp.Data); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
}

func (s *Server) answer(ctx context.Context, req *request, resp *response, transcript *io.WriteCloser) error {
	if req.Session != s.Session {
		return fmt.Errorf("session %s: this run is of session %s", req.Session, s.Session)
	}
	if req.Op != OpSession && req.Op != OpGet && req.Op != OpIDs && req.Op != OpPlug && s.MayWrite != nil {
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
	case OpAppend:
		if *transcript == nil {
			if *transcript, err = s.Store.Transcript(s.Session); err != nil {
				return err
			}
		}
		_, err = (*transcript).Write(req.Data)
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
