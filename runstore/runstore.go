// Package runstore carries the store of one run over a connection: a
// session process on a server's runner reads its session and records its
// reports, transcript and persisted plug state through it (L7, C11). The
// server's side answers for one session only, and refuses writes once the
// run may no longer write (a run the server failed).
package runstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/session"
)

// Op is an operation of the wire protocol.
type Op string

const (
	OpSession  Op = "session"
	OpLoaded   Op = "loaded"
	OpPaused   Op = "paused"
	OpTornDown Op = "torn_down"
	OpAppend   Op = "transcript_append"
	OpGet      Op = "persisted_get"
	OpSet      Op = "persisted_set"
	OpDelete   Op = "persisted_delete"
	OpIDs      Op = "persisted_ids"
	OpPlug     Op = "persisted_plug"
	maxData       = 64 << 20 // a persisted value may be large
)

// request is one call, one JSON object per line.
type request struct {
	ID       uint64               `json:"id"`
	Op       Op                   `json:"op"`
	Session  string               `json:"session"`
	PlugID   string               `json:"plug_id,omitempty"`
	PlugName string               `json:"plug_name,omitempty"`
	Size     int                  `json:"size,omitempty"` // of Data, which follows the line
	Data     []byte               `json:"-"`
	Loaded   *session.Loaded      `json:"loaded,omitempty"`
	Pause    *session.PauseRecord `json:"pause,omitempty"`
	Failure  string               `json:"failure,omitempty"`
	At       time.Time            `json:"at,omitzero"`
}

// response answers the request with the same id.
type response struct {
	ID       uint64          `json:"id"`
	Error    string          `json:"error,omitempty"`
	NotFound bool            `json:"not_found,omitempty"`
	Record   *session.Record `json:"record,omitempty"`
	Size     int             `json:"size,omitempty"` // of Data, which follows the line
	Data     []byte          `json:"-"`
	OK       bool            `json:"ok,omitempty"`
	IDs      []string        `json:"ids,omitempty"`
	Name     string          `json:"name,omitempty"`
}

// Client is a session.RunStore over a connection. Calls take turns: a run
// writes little, and in order.
type Client struct {
	mu   sync.Mutex
	w    *bufio.Writer
	r    *bufio.Reader
	next uint64
	err  error // the connection broke: every later call fails
}

var _ session.RunStore = (*Client)(nil)

// NewClient returns a client over rw.
func NewClient(rw io.ReadWriter) *Client {
	return &Client{w: bufio.NewWriterSize(rw, 64<<10), r: bufio.NewReaderSize(rw, 64<<10)}
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
	w.Write(data)
	return w.Flush()
}

// readFrame reads a line into v, and the size bytes that follow it, which
// size returns once v is read.
func readFrame(r *bufio.Reader, v any, size func() int) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("a line longer than %d bytes", r.Size())
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return nil, fmt.Errorf("a bad line %.200q: %w", line, err)
	}
	n := size()
	if n < 0 || n > maxData {
		return nil, fmt.Errorf("data of %d bytes (at most %d)", n, maxData)
	}
	if n == 0 {
		return nil, nil
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return data, nil
}

func (c *Client) call(req request) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return response{}, c.err
	}
	c.next++
	req.ID, req.Size = c.next, len(req.Data)
	if err := writeFrame(c.w, req, req.Data); err != nil {
		c.err = fmt.Errorf("store: %w", err)
		return response{}, c.err
	}
	var resp response
	data, err := readFrame(c.r, &resp, func() int { return resp.Size })
	switch {
	case err == io.EOF:
		c.err = errors.New("store: the connection ended")
	case err != nil:
		c.err = fmt.Errorf("store: the answer to %s: %w", req.Op, err)
	case resp.ID != req.ID:
		c.err = fmt.Errorf("store: the answer to call %d came for call %d", req.ID, resp.ID)
	}
	if c.err != nil {
		return response{}, c.err
	}
	resp.Data = data
	switch {
	case resp.NotFound:
		return resp, fmt.Errorf("session %s: %w", req.Session, session.ErrNotFound)
	case resp.Error != "":
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

func (c *Client) Session(id string) (*session.Record, error) {
	resp, err := c.call(request{Op: OpSession, Session: id})
	return resp.Record, err
}

func (c *Client) Loaded(id string, l session.Loaded) error {
	_, err := c.call(request{Op: OpLoaded, Session: id, Loaded: &l})
	return err
}

func (c *Client) Paused(id string, p session.PauseRecord) (*session.Record, error) {
	resp, err := c.call(request{Op: OpPaused, Session: id, Pause: &p})
	return resp.Record, err
}

func (c *Client) TornDown(id string, failure error, at time.Time) (*session.Record, error) {
	req := request{Op: OpTornDown, Session: id, At: at}
	if failure != nil {
		req.Failure = failure.Error()
		if req.Failure == "" {
			req.Failure = "teardown failed"
		}
	}
	resp, err := c.call(req)
	return resp.Record, err
}

// Transcript appends what is written to the session's transcript; each
// Write returns once the store has it.
func (c *Client) Transcript(id string) (io.WriteCloser, error) {
	return transcript{c, id}, nil
}

type transcript struct {
	c  *Client
	id string
}

func (t transcript) Write(p []byte) (int, error) {
	if _, err := t.c.call(request{Op: OpAppend, Session: t.id, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t transcript) Close() error { return nil }

func (c *Client) Persisted() session.Persisted { return persisted{c} }

func (c *Client) PersistedIDs(id string) ([]string, error) {
	resp, err := c.call(request{Op: OpIDs, Session: id})
	return resp.IDs, err
}

func (c *Client) PersistedPlug(id, plugID string) (string, bool, error) {
	resp, err := c.call(request{Op: OpPlug, Session: id, PlugID: plugID})
	return resp.Name, resp.OK, err
}

type persisted struct{ c *Client }

func (p persisted) Get(_ context.Context, id, plugID string) ([]byte, bool, error) {
	resp, err := p.c.call(request{Op: OpGet, Session: id, PlugID: plugID})
	return resp.Data, resp.OK, err
}

// Set returns once the server has committed the write.
func (p persisted) Set(_ context.Context, id, plugID, plugName string, data []byte) error {
	_, err := p.c.call(request{Op: OpSet, Session: id, PlugID: plugID, PlugName: plugName, Data: data})
	return err
}

func (p persisted) Delete(_ context.Context, id, plugID string) error {
	_, err := p.c.call(request{Op: OpDelete, Session: id, PlugID: plugID})
	return err
}
