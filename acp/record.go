package acp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/jsonstr"
)

// Recorder receives every message where it leaves the chain (M5): toward
// the agent as the agent sees it, toward the client as the client gets it.
// by names the plug that answered a request, or is empty.
type Recorder interface {
	// Record must not keep m or its bytes: once sent, a message's buffer
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
type JSONLRecorder struct {
	mu  sync.Mutex
	w   *bufio.Writer
	c   io.Closer
	seq uint64
	err error
	now func() time.Time
}

// NewJSONLRecorder records to w; Close flushes and closes w when it is an
// io.Closer.
func NewJSONLRecorder(w io.Writer) *JSONLRecorder {
	r := &JSONLRecorder{w: bufio.NewWriterSize(w, 64<<10), now: time.Now}
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
	// Encoded into the writer's free space: no copy when it fits.
	_, err := r.w.Write(appendRecord(r.w.AvailableBuffer(), r.seq, r.now(), side, m, by))
	if err == nil && m.Kind != Notification {
		// Flush at each request and response: a transcript stays current
		// without a write per streamed chunk.
		err = r.w.Flush()
	}
	r.err = err
}

// Close flushes the records and closes the underlying writer.
func (r *JSONLRecorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.w.Flush()
	if r.c != nil {
		if cerr := r.c.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = r.err
	}
	return err
}

// appendRecord encodes a Record by hand so that the message's bytes appear
// exactly as they were sent (encoding/json would re-escape them).
func appendRecord(b []byte, seq uint64, t time.Time, side Side, m *Message, by string) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendQuote(b, t.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"direction":"`...)
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
	b = append(b, `,"message":`...)
	b = append(b, m.Raw...)
	return append(b, "}\n"...)
}
