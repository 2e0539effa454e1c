package server

import (
	"net"
	"sync"
	"syscall"
)

// Connections are capped in total and per address, so that no one holds
// the descriptors every runner and client need: the cap stays below the
// descriptor limit (which Go raises to its hard limit at start), and a
// connection over a cap is closed as soon as it is accepted.
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
// them; 0 is no cap.
type limitListener struct {
	net.Listener
	total, perAddr int
	// opened is told +1 and -1 as connections open and close.
	opened func(delta int)

	mu     sync.Mutex
	n      int
	byAddr map[string]int
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.total > 0 && l.n >= l.total) || (l.perAddr > 0 && l.byAddr[addr] >= l.perAddr) {
		return false
	}
	if l.byAddr == nil {
		l.byAddr = map[string]int{}
	}
	l.n++
	l.byAddr[addr]++
	l.opened(1)
	return true
}

func (l *limitListener) give(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.byAddr[addr]--; l.byAddr[addr] == 0 {
		delete(l.byAddr, addr)
	}
	l.opened(-1)
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
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.give(c.addr) })
	return c.Conn.Close()
}
