package blaise

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Control is one message on the control channel between a front end and a
// session process, one JSON object per line. The front end sends "stop";
// the session process reports "resumable", "pause" and "teardown" (L7),
// and, as a run attaches, its progress (ControlAttaching).
type Control struct {
	Type      string `json:"type"`
	Run       int    `json:"run,omitempty"`
	Reason    string `json:"reason,omitempty"`
	MayResume bool   `json:"may_resume,omitempty"`
	Resumable bool   `json:"resumable,omitempty"`
	Error     string `json:"error,omitempty"`
	Plug      string `json:"plug,omitempty"` // ControlAttaching: the plug attaching; "": the agent starting
}

// ControlAttaching is the kind of the messages that say which plug of a
// start or resume run attaches now.
const ControlAttaching = "attaching"

// ControlConn reads and writes Control messages.
type ControlConn struct {
	mu  sync.Mutex
	w   io.Writer
	sc  *bufio.Scanner
	enc *json.Encoder
}

// NewControlConn returns a connection over rw.
func NewControlConn(r io.Reader, w io.Writer) *ControlConn {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &ControlConn{w: w, sc: sc, enc: json.NewEncoder(w)}
}

// Send writes m.
func (c *ControlConn) Send(m Control) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(m); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	return nil
}

// Receive reads the next message; io.EOF when the peer is gone.
func (c *ControlConn) Receive() (Control, error) {
	for c.sc.Scan() {
		var m Control
		if err := json.Unmarshal(c.sc.Bytes(), &m); err != nil {
			return Control{}, fmt.Errorf("control: bad message %q: %w", c.sc.Text(), err)
		}
		return m, nil
	}
	if err := c.sc.Err(); err != nil {
		return Control{}, err
	}
	return Control{}, io.EOF
}
