package server

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Connections are capped in total and per address, so that no one holds
// the descriptors every runner and client need: the cap stays below the
// descriptor limit (which Go raises to its hard limit at start), and a
// connection over a cap is closed as soon as it is accepted (at the total
// cap, one that waits for a request is closed first to make room).
const (
	// DefaultMaxConnsPerAddr is the per-address cap; behind a reverse
	// proxy every connection comes from the proxy, and the cap is the
	// proxy's to set (--max-conns-per-addr 0).
	DefaultMaxConnsPerAddr = 256
	// reservedFDs are kept for the database, transcripts and processes.
	reservedFDs = 256
)

// DefaultMaxConns is three quarters of the descriptor limit, less
// reservedFDs, and at least 64.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<24 {
		return 1 << 16
	}
	return max(64, int(rl.Cur)*3/4-reservedFDs)
}

// limitListener closes the connections beyond its caps as it accepts
// them; 0 is no cap. At the total cap, it first closes the connection
// that has waited longest for a request (none sent yet, or none since the
// last), to make room: connections that send nothing, which the header and
// idle timeouts close only after a while, cannot keep a runner or a health
// check out.
type limitListener struct {
	net.Listener
	total, perAddr int
	// opened is told +1 and -1 as connections open and close.
	opened func(delta int)

	mu     sync.Mutex
	n      int
	byAddr map[string]int
	// waiting are the connections that wait for a request, the longest
	// waiting first (*countedConn).
	waiting list.List
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := hostOf(c.RemoteAddr())
		if !l.take(addr) {
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *limitListener) take(addr string) bool {
	for {
		l.mu.Lock()
		if l.perAddr > 0 && l.byAddr[addr] >= l.perAddr {
			l.mu.Unlock()
			return false
		}
		if l.total > 0 && l.n >= l.total {
			oldest := l.waiting.Front()
			l.mu.Unlock()
			if oldest == nil {
				return false
			}
			oldest.Value.(*countedConn).Close() // gives its place back
			continue
		}
		if l.byAddr == nil {
			l.byAddr = map[string]int{}
		}
		l.n++
		l.byAddr[addr]++
		l.opened(1)
		l.mu.Unlock()
		return true
	}
}

func (l *limitListener) give(c *countedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unwait(c)
	c.gone = true
	l.n--
	if l.byAddr[c.addr]--; l.byAddr[c.addr] == 0 {
		delete(l.byAddr, c.addr)
	}
	l.opened(-1)
}

// connState is the server's ConnState: it keeps the connections that wait
// for a request in the order they began to.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cc, ok := c.(*countedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unwait(cc)
	if (st == http.StateNew || st == http.StateIdle) && !cc.gone {
		cc.wait = l.waiting.PushBack(cc)
	}
}

// unwait takes c out of the waiting connections; l.mu is held.
func (l *limitListener) unwait(c *countedConn) {
	if c.wait != nil {
		l.waiting.Remove(c.wait)
		c.wait = nil
	}
}

func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// countedConn gives its place back when closed, once.
type countedConn struct {
	net.Conn
	l    *limitListener
	addr string
	once sync.Once
	// wait is its place among l.waiting; gone, that it was closed. Both
	// under l.mu.
	wait *list.Element
	gone bool
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.give(c) })
	return c.Conn.Close()
}
