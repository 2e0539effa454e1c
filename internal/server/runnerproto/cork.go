package runnerproto

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Corked is a connection whose writes gather, between Cork and Uncork,
// into one write. A WebSocket client masks what it sends in 4 KiB pieces
// and writes each apart; corked while a message goes out, a runner's
// message costs one system call instead of one per 4 KiB.
type Corked struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *Corked) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Cork holds the writes from now on.
func (c *Corked) Cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was held, in one write, and lets writes through.
func (c *Corked) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// CorkingClient returns a client like hc (nil: http.DefaultClient) for
// one WebSocket dial, and a function that returns the connection it
// dialed, corkable; nil when it cannot tell (hc has a transport of its
// own, or dialed nothing). The connection is below TLS, if any: corking
// gathers TLS records as well.
func CorkingClient(hc *http.Client) (*http.Client, func() *Corked) {
	if hc == nil {
		hc = http.DefaultClient
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	base, ok := rt.(*http.Transport)
	if !ok {
		return hc, func() *Corked { return nil }
	}
	t := base.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var mu sync.Mutex
	var last *Corked
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		last = &Corked{Conn: conn}
		return last, nil
	}
	client := *hc
	client.Transport = t
	return &client, func() *Corked {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}
