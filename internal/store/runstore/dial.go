package runstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A run's store on a connection of its own (runner protocol 7): the
// session process asks the server for PathStore with an HTTP/1.1 upgrade
// to UpgradeStore, its run in the query and its ticket as a bearer token;
// after "101 Switching Protocols" the connection carries the run's calls
// and their answers as a runner's store stream does, with nothing around
// them: no WebSocket, no yamux, no runner in between.
const (
	PathStore    = "/v1/runner/store"
	UpgradeStore = "blaise-store.v1"
)

// ErrNoRun is the error of DialStore when the server has no run of the
// ref for a store connection: not yet (its runner has not come back
// since the server restarted) or not any more.
var ErrNoRun = errors.New("the server has no such run for a store connection")

// ErrTicket is the error of DialStore when the server refuses the ticket.
var ErrTicket = errors.New("the server refused the run's ticket")

// DialStore opens a store connection of run number run of session to
// server (its http:// or https:// URL). An empty ticket probes: the
// server answers the upgrade and closes the connection, which a runner
// does to learn that the way to the server lets such upgrades through.
func DialStore(ctx context.Context, server, session string, run int, ticket string) (net.Conn, error) {
	u, err := url.Parse(strings.TrimRight(server, "/") + PathStore)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", server, err)
	}
	q := url.Values{"probe": {"1"}}
	if ticket != "" {
		q = url.Values{"session": {session}, "run": {strconv.Itoa(run)}}
	}
	u.RawQuery = q.Encode()
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	// A path that dies is found within about 30 s, idle or not, as a
	// runner's keepalives found it on its connection.
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 10 * time.Second, Count: 3}, Control: userTimeout}
	var conn net.Conn
	switch u.Scheme {
	case "http":
		conn, err = d.DialContext(ctx, "tcp", host)
	case "https":
		// HTTP/1.1 by name: an upgrade is of HTTP/1.1.
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}}
		conn, err = td.DialContext(ctx, "tcp", host)
	default:
		return nil, fmt.Errorf("server %s: the URL's scheme is not http or https", server)
	}
	if err != nil {
		return nil, err
	}
	if err := upgrade(ctx, conn, u, ticket); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// upgrade asks for the store on conn and reads the server's answer.
func upgrade(ctx context.Context, conn net.Conn, u *url.URL, ticket string) error {
	// ctx done (its deadline too) ends the exchange: the connection is
	// closed under it.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	err := exchange(conn, u, ticket)
	if !stop() && err == nil {
		return ctx.Err()
	}
	return err
}

// exchange writes the upgrade's request on conn and reads its answer.
func exchange(conn net.Conn, u *url.URL, ticket string) error {
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeStore + "\r\n"
	if ticket != "" {
		req += "Authorization: Bearer " + ticket + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return err
	}
	// The server says nothing after its answer until it is sent a call:
	// the reader takes no byte of the store's.
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("the server's answer to a store upgrade: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), UpgradeStore) && br.Buffered() == 0:
		return nil
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get("Upgrade") == UpgradeStore:
		return ErrNoRun
	case resp.StatusCode == http.StatusForbidden:
		return ErrTicket
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("the server did not take a store upgrade (%s): %s", resp.Status, strings.TrimSpace(string(msg)))
}

// AcceptStore answers a store upgrade of r and returns its connection,
// taken from the HTTP server.
func AcceptStore(w http.ResponseWriter, r *http.Request) (net.Conn, error) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeStore) {
		http.Error(w, "a store connection asks for an upgrade to "+UpgradeStore, http.StatusUpgradeRequired)
		return nil, errors.New("not an upgrade")
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "no upgrade on this connection (HTTP/1.1 only)", http.StatusHTTPVersionNotSupported)
		return nil, err
	}
	if brw.Reader.Buffered() > 0 {
		conn.Close()
		return nil, errors.New("a store call before the upgrade's answer")
	}
	// The HTTP server's deadlines are not the store's.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+UpgradeStore+"\r\n\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// RefuseStore answers a store upgrade with an error: with 404, that the
// server has no such run (ErrNoRun to DialStore, whose caller tries
// again); with 403, that the ticket is not the run's (ErrTicket).
func RefuseStore(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusNotFound {
		w.Header().Set("Upgrade", UpgradeStore)
	}
	http.Error(w, msg, status)
}

// Redialer is a run's store over connections to the server it dials one
// after the other (runner protocol 7), as a Client's connection: it does
// for the run what a runner's Relay does. When a connection breaks, it
// dials the next; the Client reads the notice of it (Notice) and sends
// again what was not answered, after an OpResync, which moves the writes
// to the new connection (resume). What is written before that is dropped:
// it comes again after the OpResync. Answers are read whole: one cut
// short by a broken connection is dropped, and its call sent again.
type Redialer struct {
	dial   func(context.Context) (net.Conn, error)
	ctx    context.Context
	cancel context.CancelFunc

	// Of Read, which one goroutine calls (the Client's receive).
	frames  *FrameReader
	pending []byte        // what is left of the frame or notice being read
	wait    time.Duration // before the next dial: 0 once a connection answered

	mu     sync.Mutex
	cur    net.Conn // where writes go
	next   net.Conn // where answers come from: the newest
	gen    uint64   // of next; 1 for the first
	closed bool
}

// Redial dials the run's first store connection, again until ctx is done
// as a broken one is (redial), and returns a Redialer that dials the next
// ones with dial, until Close.
func Redial(ctx context.Context, dial func(context.Context) (net.Conn, error)) (*Redialer, error) {
	r := &Redialer{dial: dial, gen: 1}
	conn, err := r.redial(ctx)
	if err != nil {
		return nil, err
	}
	r.frames, r.cur, r.next = NewFrameReader(conn), conn, conn
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return r, nil
}

// Read reads whole answers of the connection, and after one broke the
// notice of the next.
func (r *Redialer) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		f, err := r.frames.Next()
		if err == nil {
			r.pending, r.wait = f.Bytes, 0
			break
		}
		r.mu.Lock()
		broken := r.next
		r.mu.Unlock()
		broken.Close() // its writes fail from now on
		conn, err := r.redial(r.ctx)
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			conn.Close()
			return 0, io.EOF
		}
		r.gen++
		r.next = conn
		r.pending = Notice(r.gen)
		r.mu.Unlock()
		r.frames = NewFrameReader(conn)
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// redial dials until a connection is made, the server refuses the ticket,
// or ctx is done (io.EOF once the Redialer is closed, else the last
// error). It waits more after each connection that broke before it
// answered (20 ms doubling to 2 s): a server that has no such run yet
// (after a restart, until the runner is back) or that closes at once.
func (r *Redialer) redial(ctx context.Context) (net.Conn, error) {
	var last error
	for {
		if r.wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(r.wait):
			}
		}
		if ctx.Err() != nil {
			if r.ctx != nil || last == nil {
				return nil, io.EOF
			}
			return nil, last
		}
		r.wait = min(max(2*r.wait, 20*time.Millisecond), 2*time.Second)
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		conn, err := r.dial(attempt)
		cancel()
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, ErrTicket) {
			return nil, err
		}
		last = err
	}
}

// Write writes to the connection in use; what a broken one does not take
// is dropped, to be sent again on the next.
func (r *Redialer) Write(p []byte) (int, error) {
	r.mu.Lock()
	conn := r.cur
	r.mu.Unlock()
	if _, err := conn.Write(p); err != nil {
		conn.Close() // for Read to dial the next
	}
	return len(p), nil
}

// resume moves the writes to the connection of generation gen: the Client
// calls it, holding its write lock, before the OpResync of gen.
func (r *Redialer) resume(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen == r.gen {
		r.cur = r.next
	}
}

// Close closes the connection and dials no more: Read returns io.EOF.
func (r *Redialer) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.cur.Close()
	return r.next.Close()
}
