package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// ControlConn reads and writes the messages of the control channel
// (session.Control), one JSON object per line.
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
func (c *ControlConn) Send(m lifecycle.Control) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(m); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	return nil
}

// Receive reads the next message; io.EOF when the peer is gone.
func (c *ControlConn) Receive() (lifecycle.Control, error) {
	for c.sc.Scan() {
		var m lifecycle.Control
		if err := json.Unmarshal(c.sc.Bytes(), &m); err != nil {
			return lifecycle.Control{}, fmt.Errorf("control: bad message %q: %w", c.sc.Text(), err)
		}
		return m, nil
	}
	if err := c.sc.Err(); err != nil {
		return lifecycle.Control{}, err
	}
	return lifecycle.Control{}, io.EOF
}
