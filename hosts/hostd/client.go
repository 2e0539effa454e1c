package hostd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/hashicorp/yamux"
)

// connectTimeout bounds the handshake.
const connectTimeout = time.Minute

// Transport is the byte stream to a hostd.
type Transport interface {
	io.ReadWriteCloser
	// Diagnose says why the stream broke or never carried the protocol
	// (the transport's exit status, the end of its stderr), or "".
	Diagnose() string
}

// ClientOptions configures NewClient.
type ClientOptions struct {
	// Name identifies the host in errors ("host <name>: …").
	Name string
	// Kind is what host.info.kind says: "command", "ssh" …
	Kind string
	// Connect opens the transport. The client calls it when first used,
	// and again only when a call's context ended that attempt; ctx bounds
	// the start only.
	Connect func(ctx context.Context) (Transport, error)
}

// Client is a hosts.Host on the far side of a hostd stream. It connects
// when first used; a connection that failed for another reason than the
// end of a call's context fails every later call with the same error.
type Client struct {
	opts ClientOptions
	fs   clientFS

	mu       sync.Mutex
	attempt  *attempt // the connection made or being made; nil before the first use
	sess     *yamux.Session
	tr       Transport
	hello    Hello
	closed   bool
	forwards map[*forward]struct{}

	lostOnce sync.Once
	lostErr  error // the error of calls once the stream broke
}

var (
	_ hosts.Host      = (*Client)(nil)
	_ hosts.Forwarder = (*Client)(nil)
)

// NewClient returns a host that connects with opts.Connect when first used.
func NewClient(opts ClientOptions) *Client {
	c := &Client{opts: opts, forwards: map[*forward]struct{}{}}
	c.fs.c = c
	return c
}

// Dial returns a client of the hostd at the other end of tr, connected.
func Dial(ctx context.Context, tr Transport, name, kind string) (*Client, error) {
	c := NewClient(ClientOptions{Name: name, Kind: kind, Connect: func(context.Context) (Transport, error) { return tr, nil }})
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// attempt is one try to connect.
type attempt struct {
	done chan struct{} // closed when it ended
	err  error         // why it failed
}

// session connects on first use and returns the session, or why there is
// none. A failed connection stays failed, unless it failed because the
// context of the call that made it ended: that call gets its context's
// error, and the next call, or one that was waiting, tries again.
func (c *Client) session(ctx context.Context) (*yamux.Session, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, c.errorf("%w", hosts.ErrClosed)
		}
		a := c.attempt
		first := a == nil
		if first {
			a = &attempt{done: make(chan struct{})}
			c.attempt = a
		}
		c.mu.Unlock()
		if first {
			sess, tr, hello, err := c.connect(ctx)
			c.mu.Lock()
			c.sess, c.tr, c.hello, a.err = sess, tr, hello, err
			if err != nil && ctx.Err() != nil && !c.closed {
				c.attempt = nil
			}
			closed := c.closed
			close(a.done)
			c.mu.Unlock()
			if closed && sess != nil {
				// Closed while connecting; the transport's Close may wait.
				sess.Close()
				tr.Close()
			}
		}
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, c.errorf("%w", hosts.ErrClosed)
		case a.err != nil && !first && c.attempt != a:
			// Another call's context ended its attempt; ours is live.
			c.mu.Unlock()
			continue
		case a.err != nil:
			c.mu.Unlock()
			return nil, a.err
		case c.sess.IsClosed():
			tr := c.tr
			c.mu.Unlock()
			return nil, c.lost(tr)
		}
		sess := c.sess
		c.mu.Unlock()
		return sess, nil
	}
}

// connect opens the transport and makes the handshake.
func (c *Client) connect(ctx context.Context) (*yamux.Session, Transport, Hello, error) {
	tr, err := c.opts.Connect(ctx)
	if err != nil {
		return nil, nil, Hello{}, c.errorf("connect: %w", err)
	}
	fail := func(err error) (*yamux.Session, Transport, Hello, error) {
		tr.Close()
		if d := tr.Diagnose(); d != "" {
			return nil, nil, Hello{}, c.errorf("connect: %w (%s)", err, d)
		}
		return nil, nil, Hello{}, c.errorf("connect: %w", err)
	}
	// The handshake is bounded; closing the transport ends a read that
	// would block forever.
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { tr.Close() })
	br := bufio.NewReader(tr)
	hello, err := readHello(br, Version)
	if err == nil {
		mine := Hello{OS: runtime.GOOS, Arch: runtime.GOARCH}
		err = writeHello(tr, Version, mine)
	}
	if !stop() {
		return fail(fmt.Errorf("handshake: %w", ctx.Err()))
	}
	if err != nil {
		return fail(err)
	}
	cw := newCoalescingWriter(tr)
	sess, err := yamux.Client(readWriteCloser{br, cw, closers{cw, tr}}, muxConfig())
	if err != nil {
		return fail(err)
	}
	return sess, tr, hello, nil
}

// HostError is an error of a hostd host that names it: "host <name>: …".
type HostError struct {
	Host string // ClientOptions.Name
	Err  error
}

func (e *HostError) Error() string { return "host " + e.Host + ": " + e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// errorf makes an error that names the host.
func (c *Client) errorf(format string, args ...any) error {
	return &HostError{Host: c.opts.Name, Err: fmt.Errorf(format, args...)}
}

// Name is the host's name in errors.
func (c *Client) Name() string { return c.opts.Name }

// lost is the error of calls once the stream over tr broke. c.mu is not
// held: tr.Diagnose may wait for the transport to end, so it is asked
// once and its answer kept.
func (c *Client) lost(tr Transport) error {
	c.lostOnce.Do(func() {
		c.lostErr = c.errorf("%w", errLost)
		if d := tr.Diagnose(); d != "" {
			c.lostErr = c.errorf("%w (%s)", errLost, d)
		}
	})
	return c.lostErr
}

// errLost is the cause of calls that fail because the stream broke.
var errLost = errors.New("connection to the host lost")

// fail explains err of a call: a broken stream, a closed host or the
// call's own context win over what the stream said.
func (c *Client) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.mu.Lock()
	closed, sess, tr := c.closed, c.sess, c.tr
	c.mu.Unlock()
	switch {
	case closed:
		return c.errorf("%w", hosts.ErrClosed)
	case sess != nil && sess.IsClosed():
		return c.lost(tr)
	}
	return c.errorf("%w", err)
}

// sameOS reports whether errnos of the far side mean what ours do.
func (c *Client) sameOS() bool { return c.hello.OS == runtime.GOOS }

// open starts a call: it opens a stream, sends req and body, and reads the
// response header. When ctx ends first, the stream is closed, which
// cancels the call on the far side. The caller closes the stream.
func (c *Client) open(ctx context.Context, req request, body []byte) (*yamux.Stream, response, error) {
	var resp response
	sess, err := c.session(ctx)
	if err != nil {
		return nil, resp, err
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, resp, c.fail(ctx, err)
	}
	stop := context.AfterFunc(ctx, func() {
		st.Close()
		_ = st.SetReadDeadline(time.Now())
	})
	defer stop()
	err = writeHeader(st, req)
	if err == nil && body != nil {
		_, err = st.Write(body)
	}
	if err == nil {
		err = readHeader(st, &resp)
	}
	if err != nil {
		st.Close()
		return nil, resp, c.fail(ctx, err)
	}
	return st, resp, nil
}

// call makes a call whose answer is one header; a failure of the call on
// the far side is returned as its error.
func (c *Client) call(ctx context.Context, req request) (response, error) {
	st, resp, err := c.open(ctx, req, nil)
	if err != nil {
		return resp, err
	}
	st.Close()
	err = resp.Err.decode(c.sameOS())
	if err != nil && ctx.Err() != nil {
		// The far side stopped the call because ctx ended: say so, as the
		// local host does, rather than pass on its "context canceled".
		return resp, fmt.Errorf("%s: %w", req.Op, ctx.Err())
	}
	return resp, err
}

// Info describes the far host, as its hostd reported it in the handshake.
func (c *Client) Info(ctx context.Context) (hosts.Info, error) {
	if _, err := c.session(ctx); err != nil {
		return hosts.Info{}, err
	}
	h := c.hello
	return hosts.Info{Kind: c.opts.Kind, OS: h.OS, Home: h.Home, Tmpdir: h.Tmpdir, Workspace: h.Workspace, Persistent: h.Persistent}, nil
}

// Hello returns what the far side said in the handshake, connecting first
// if needed.
func (c *Client) Hello(ctx context.Context) (Hello, error) {
	if _, err := c.session(ctx); err != nil {
		return Hello{}, err
	}
	return c.hello, nil
}

// Exec runs argv on the far host; see hosts.Local.Exec.
func (c *Client) Exec(ctx context.Context, argv []string, opts hosts.ExecOptions) (hosts.ExecResult, error) {
	req := request{Op: opExec, Argv: argv, Dir: opts.Dir, Env: opts.Env, Stdin: opts.Stdin, HasStdin: opts.Stdin != nil, TimeoutNS: int64(opts.Timeout)}
	resp, err := c.call(ctx, req)
	res := hosts.ExecResult{Code: -1}
	if e := resp.Exec; e != nil {
		res = hosts.ExecResult{Code: e.Code, Stdout: e.Stdout, Stderr: e.Stderr, TimedOut: e.TimedOut}
	}
	return res, err
}

// Spawn starts a process on the far host; its standard streams are
// streams of the connection. ctx bounds the start only.
func (c *Client) Spawn(ctx context.Context, spec hosts.SpawnSpec) (hosts.Process, error) {
	ctl, resp, err := c.open(ctx, request{Op: opSpawn, Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env}, nil)
	if err != nil {
		return nil, err
	}
	if err := resp.Err.decode(c.sameOS()); err != nil {
		ctl.Close()
		return nil, err
	}
	p := &remoteProcess{c: c, id: resp.Proc, pid: resp.PID, ctl: ctl, done: make(chan struct{})}
	// Wait waits for it (done).
	go p.wait()
	streams := make([]*yamux.Stream, 0, 3)
	for _, op := range []string{opStdin, opStdout, opStderr} {
		st, resp, err := c.open(ctx, request{Op: op, Proc: p.id}, nil)
		if err == nil {
			err = resp.Err.decode(c.sameOS())
		}
		if err != nil {
			for _, st := range streams {
				st.Close()
			}
			_ = p.Kill()
			return nil, err
		}
		streams = append(streams, st)
	}
	p.stdin, p.stdout, p.stderr = streams[0], streams[1], streams[2]
	return p, nil
}

// Close closes the connection, which has the hostd kill every process it
// started and exit, and waits for the transport to end.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	a := c.attempt
	fws := c.forwards
	c.forwards = nil
	c.mu.Unlock()
	for f := range fws {
		f.Close()
	}
	if a == nil {
		return nil // never connected
	}
	<-a.done
	if c.sess == nil {
		return nil
	}
	// Closing the session closes the transport, and the transport's own
	// Close waits for the command to end; either may report what the
	// other already did.
	c.sess.Close()
	_ = c.tr.Close()
	return nil
}

// remoteProcess is a process started by Client.Spawn.
type remoteProcess struct {
	c   *Client
	id  uint64
	pid int
	ctl *yamux.Stream // reports the exit

	stdin, stdout, stderr *yamux.Stream

	done    chan struct{}
	code    int
	waitErr error
}

// wait reads the exit report.
func (p *remoteProcess) wait() {
	defer close(p.done)
	defer p.ctl.Close()
	var resp response
	err := readHeader(p.ctl, &resp)
	switch {
	case err != nil:
		p.code, p.waitErr = -1, p.c.fail(context.Background(), err)
	case !resp.Exited:
		p.code, p.waitErr = -1, p.c.errorf("process %d: bad exit report", p.pid)
	default:
		p.code, p.waitErr = resp.ExitCode, resp.Err.decode(p.c.sameOS())
	}
}

func (p *remoteProcess) Pid() int              { return p.pid }
func (p *remoteProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *remoteProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *remoteProcess) Stderr() io.ReadCloser { return p.stderr }

// Wait waits for the exit report. When the connection breaks first, the
// code is -1 and the error says so.
func (p *remoteProcess) Wait() (int, error) { <-p.done; return p.code, p.waitErr }

func (p *remoteProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process group on the far host.
func (p *remoteProcess) Signal(sig string) error {
	if p.exited() {
		return fmt.Errorf("signal %s: process %d has exited", sig, p.pid)
	}
	_, err := p.c.call(context.Background(), request{Op: opSignal, Proc: p.id, Signal: sig})
	return err
}

// Kill kills the process group on the far host and waits for the exit
// report.
func (p *remoteProcess) Kill() error {
	if p.exited() {
		return nil
	}
	_, err := p.c.call(context.Background(), request{Op: opKill, Proc: p.id})
	if err != nil && !errors.Is(err, errLost) && !errors.Is(err, hosts.ErrClosed) {
		return err
	}
	<-p.done
	return nil
}

// Forward listens on spec.LocalAddr on the runner and connects every
// connection to spec.RemoteAddr as the far host sees it. The forward ends
// when the closer is closed or the host is.
func (c *Client) Forward(ctx context.Context, spec hosts.ForwardSpec) (string, io.Closer, error) {
	if _, err := c.session(ctx); err != nil {
		return "", nil, err
	}
	local := spec.LocalAddr
	if local == "" {
		local = "127.0.0.1:0"
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", local)
	if err != nil {
		return "", nil, c.errorf("forward: %w", err)
	}
	f := &forward{c: c, ln: ln, remote: spec.RemoteAddr, conns: map[net.Conn]struct{}{}}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ln.Close()
		return "", nil, c.errorf("%w", hosts.ErrClosed)
	}
	c.forwards[f] = struct{}{}
	c.mu.Unlock()
	// Ends once forward.Close closes f.ln.
	go f.serve()
	return ln.Addr().String(), f, nil
}

// forward is a listening port of Client.Forward.
type forward struct {
	c      *Client
	ln     net.Listener
	remote string

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func (f *forward) serve() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(conn, true) {
			conn.Close()
			return
		}
		// Ends with conn or its stream; forward.Close closes every conn.
		go func() {
			defer f.track(conn, false)
			st, resp, err := f.c.open(context.Background(), request{Op: opDial, Addr: f.remote}, nil)
			if err == nil {
				err = resp.Err.decode(f.c.sameOS())
			}
			if err != nil {
				conn.Close()
				if st != nil {
					st.Close()
				}
				return
			}
			splice(conn, st)
		}()
	}
}

// track adds or removes a connection; adding fails once closed.
func (f *forward) track(conn net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, conn)
		return true
	}
	if f.closed {
		return false
	}
	f.conns[conn] = struct{}{}
	return true
}

// Close stops listening and ends the forward's connections.
func (f *forward) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	err := f.ln.Close()
	for conn := range conns {
		conn.Close()
	}
	f.c.mu.Lock()
	delete(f.c.forwards, f)
	f.c.mu.Unlock()
	return err
}

// clientFS is the far host's file system.
type clientFS struct{ c *Client }

var _ hosts.FS = (*clientFS)(nil)

// FS returns the far host's file system. Paths are the far host's.
func (c *Client) FS() hosts.FS { return &c.fs }

// pathCall makes an fs call; a failure that is not the far side's answer
// (a broken stream, a closed host) becomes an *fs.PathError of op on name.
func (f *clientFS) pathCall(ctx context.Context, req request) (response, error) {
	resp, err := f.c.call(ctx, req)
	var pe *fs.PathError
	if err != nil && !errors.As(err, &pe) {
		err = &fs.PathError{Op: req.Op, Path: req.Path, Err: err}
	}
	return resp, err
}

func (f *clientFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	st, resp, err := f.c.open(ctx, request{Op: opRead, Path: name}, nil)
	if err != nil {
		return nil, &fs.PathError{Op: opRead, Path: name, Err: err}
	}
	defer st.Close()
	if err := resp.Err.decode(f.c.sameOS()); err != nil {
		return nil, err
	}
	data, err := readBody(st, resp.Size)
	if err != nil {
		return nil, &fs.PathError{Op: opRead, Path: name, Err: f.c.fail(ctx, err)}
	}
	return data, nil
}

func (f *clientFS) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	st, resp, err := f.c.open(ctx, request{Op: opWrite, Path: name, Perm: uint32(perm), Size: int64(len(data))}, data)
	if err != nil {
		return &fs.PathError{Op: opWrite, Path: name, Err: err}
	}
	st.Close()
	return resp.Err.decode(f.c.sameOS())
}

func (f *clientFS) Mkdir(ctx context.Context, name string, perm fs.FileMode, recursive bool) error {
	_, err := f.pathCall(ctx, request{Op: opMkdir, Path: name, Perm: uint32(perm), Recursive: recursive})
	return err
}

func (f *clientFS) ReadDir(ctx context.Context, name string) ([]hosts.DirEntry, error) {
	resp, err := f.pathCall(ctx, request{Op: opReadDir, Path: name})
	return resp.Entries, err
}

func (f *clientFS) Stat(ctx context.Context, name string) (hosts.FileInfo, error) {
	return f.stat(ctx, opStat, name)
}

func (f *clientFS) Lstat(ctx context.Context, name string) (hosts.FileInfo, error) {
	return f.stat(ctx, opLstat, name)
}

func (f *clientFS) stat(ctx context.Context, op, name string) (hosts.FileInfo, error) {
	resp, err := f.pathCall(ctx, request{Op: op, Path: name})
	if err != nil {
		return hosts.FileInfo{}, err
	}
	if resp.Info == nil {
		return hosts.FileInfo{}, &fs.PathError{Op: op, Path: name, Err: errors.New("the far side sent no file info")}
	}
	i := resp.Info
	return hosts.FileInfo{Name: i.Name, Size: i.Size, Mode: fs.FileMode(i.Mode), ModTime: i.ModTime, IsDir: i.IsDir, IsSymlink: i.IsSymlink}, nil
}

func (f *clientFS) Exists(ctx context.Context, name string) (bool, error) {
	resp, err := f.pathCall(ctx, request{Op: opExists, Path: name})
	return resp.Bool, err
}

func (f *clientFS) Remove(ctx context.Context, name string, recursive, force bool) error {
	_, err := f.pathCall(ctx, request{Op: opRemove, Path: name, Recursive: recursive, Force: force})
	return err
}

func (f *clientFS) Rename(ctx context.Context, from, to string) error {
	_, err := f.pathCall(ctx, request{Op: opRename, Path: from, To: to})
	return err
}

func (f *clientFS) MkdirTemp(ctx context.Context, dir, prefix string) (string, error) {
	resp, err := f.pathCall(ctx, request{Op: opMkdtemp, Path: dir, To: prefix})
	return resp.String, err
}

func (f *clientFS) Symlink(ctx context.Context, target, name string) error {
	_, err := f.pathCall(ctx, request{Op: opSymlink, Path: name, To: target})
	return err
}

func (f *clientFS) Readlink(ctx context.Context, name string) (string, error) {
	resp, err := f.pathCall(ctx, request{Op: opReadlink, Path: name})
	return resp.String, err
}

func (f *clientFS) Chmod(ctx context.Context, name string, perm fs.FileMode) error {
	_, err := f.pathCall(ctx, request{Op: opChmod, Path: name, Perm: uint32(perm)})
	return err
}
