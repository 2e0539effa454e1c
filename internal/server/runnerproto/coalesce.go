package runnerproto

import (
	"io"
	"net"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/support/coalesce"
)

// Coalesce returns conn with its writes gathered: what is written while
// an earlier write is still going out leaves with the next one, in one
// write. Over a WebSocket each write of conn is a message of its own, and
// yamux writes a frame's header and its body apart; gathered, a burst of
// small frames costs one message. A write returns once its bytes are
// queued (at most maxQueued: a slow peer slows its writers down); an error
// of the connection is returned by the writes after it. With raw, the
// connection under conn, each gathered write leaves raw corked: in one
// system call.
func Coalesce(conn net.Conn, raw *Corked) net.Conn {
	var w io.Writer = conn
	if raw != nil {
		w = corkedWrites{conn, raw}
	}
	return &coalesced{Conn: conn, w: coalesce.New(w, coalesce.Options{Limit: maxQueued, Closed: net.ErrClosed})}
}

const maxQueued = 1 << 20

type coalesced struct {
	net.Conn
	w *coalesce.Writer
}

func (c *coalesced) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close sends what is queued (a last frame, a refusal), then closes.
func (c *coalesced) Close() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(coalesce.Grace))
	c.w.Close()
	return c.Conn.Close()
}

// corkedWrites writes to conn with raw, the connection under it, corked:
// what conn writes for one write leaves in one system call.
type corkedWrites struct {
	conn net.Conn
	raw  *Corked
}

func (c corkedWrites) Write(p []byte) (int, error) {
	c.raw.Cork()
	n, err := c.conn.Write(p)
	if uerr := c.raw.Uncork(); err == nil {
		err = uerr
	}
	return n, err
}
