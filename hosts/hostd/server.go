package hostd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/support/coalesce"
	"github.com/charmbracelet/log"
	"github.com/hashicorp/yamux"
)

// dialTimeout bounds the connection a forward makes on the host.
const dialTimeout = 10 * time.Second

// ServeOptions configures Serve.
type ServeOptions struct {
	// Log receives what the server has to say; nil: nothing is logged.
	Log *log.Logger
	// ClaimVersion, when not 0, is the protocol version announced instead
	// of Version. Only tests use it, to play a peer of another version.
	ClaimVersion int
}

// Serve serves h on rw until the client goes away, then closes h, which
// kills every process it started, and returns. The error says why the
// handshake failed; a stream that ends after it is no error.
func Serve(ctx context.Context, rw io.ReadWriteCloser, h hosts.Host, opts ServeOptions) error {
	// Closing h ends its processes, and with them the streams of handlers
	// still running, which are then waited for.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer h.Close()
	logger := opts.Log
	if logger == nil {
		logger = log.New(io.Discard)
	}
	hello, err := localHello(ctx, h)
	if err != nil {
		return fmt.Errorf("hostd: %w", err)
	}
	version := Version
	if opts.ClaimVersion != 0 {
		version = opts.ClaimVersion
	}
	if err := writeHello(rw, version, hello); err != nil {
		return fmt.Errorf("hostd: handshake: %w", err)
	}
	br := bufio.NewReader(rw)
	if _, err := readHello(br, version); err != nil {
		return fmt.Errorf("hostd: handshake: %w", err)
	}
	cw := newCoalescingWriter(rw)
	sess, err := yamux.Server(readWriteCloser{br, cw, closers{cw, rw}}, muxConfig())
	if err != nil {
		return fmt.Errorf("hostd: %w", err)
	}
	s := &server{h: h, log: logger, procs: map[uint64]*served{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Ends with the session or with the deferred cancel.
	go func() {
		select {
		case <-sess.CloseChan():
		case <-ctx.Done():
		}
		sess.Close()
	}()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			break
		}
		wg.Add(1)
		// Serve waits for it (wg).
		go func() {
			defer wg.Done()
			s.handle(ctx, st)
		}()
	}
	logger.Debug("client gone; closing the host")
	return nil
}

// readWriteCloser puts a stream back together from its parts.
type readWriteCloser struct {
	io.Reader
	io.Writer
	io.Closer
}

// closers closes each of its closers, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// newCoalescingWriter gathers yamux's frames, a header and a body each,
// into few writes to w: on a pipe a write is a system call. Large writes
// (a file's chunk) go to w directly rather than being copied.
func newCoalescingWriter(w io.Writer) *coalesce.Writer {
	return coalesce.New(w, coalesce.Options{Limit: 256 << 10, Direct: 32 << 10, Closed: io.ErrClosedPipe})
}

// server is the state of one Serve.
type server struct {
	h   hosts.Host
	log *log.Logger

	mu    sync.Mutex
	last  uint64
	procs map[uint64]*served
}

// served is a process started for the client, until it has exited and
// its three streams were attached or it was killed.
type served struct {
	p        hosts.Process
	attached map[string]bool
	exited   bool
	killed   bool // no stream is attached after a kill
}

// handle serves one call stream.
func (s *server) handle(ctx context.Context, st *yamux.Stream) {
	defer st.Close()
	var req request
	if err := readHeader(st, &req); err != nil {
		s.log.Warn("bad request", "err", err)
		_ = writeHeader(st, response{Err: toWire(fmt.Errorf("bad request: %w", err))})
		return
	}
	switch req.Op {
	case opSpawn:
		s.spawn(ctx, st, req)
		return
	case opStdin, opStdout, opStderr:
		s.attach(st, req)
		return
	case opDial:
		s.dial(ctx, st, req)
		return
	case opWrite:
		buf, err := readBody(st, req.Size)
		var resp response
		if err != nil {
			resp.Err = toWire(&fs.PathError{Op: req.Op, Path: req.Path, Err: err})
		} else {
			resp.Err = toWire(s.h.FS().WriteFile(ctx, req.Path, buf, fs.FileMode(req.Perm)))
		}
		_ = writeHeader(st, resp)
		return
	}
	// The call's context ends when the client gives up on it and closes
	// the stream.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Ends with st: closed by the client, or by handle as it returns.
	go func() {
		_, _ = io.Copy(io.Discard, st)
		cancel()
	}()
	if req.Op == opRead {
		data, err := s.h.FS().ReadFile(ctx, req.Path)
		if err := writeHeader(st, response{Err: toWire(err), Size: int64(len(data))}); err == nil {
			_, _ = st.Write(data)
		}
		return
	}
	_ = writeHeader(st, s.call(ctx, req))
}

// maxBody bounds the bytes of one file call, which are held in memory.
const maxBody = 4 << 30

// readBody reads size bytes that follow a header.
func readBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > maxBody {
		return nil, fmt.Errorf("body of %d bytes: want 0 to %d", size, int64(maxBody))
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, noEOF(err)
	}
	return b, nil
}

// call runs the calls whose answer is one header.
func (s *server) call(ctx context.Context, req request) response {
	fsys := s.h.FS()
	var resp response
	var err error
	switch req.Op {
	case opExec:
		opts := hosts.ExecOptions{Dir: req.Dir, Env: req.Env, Timeout: time.Duration(req.TimeoutNS)}
		if req.HasStdin {
			opts.Stdin = req.Stdin
			if opts.Stdin == nil {
				opts.Stdin = []byte{}
			}
		}
		var res hosts.ExecResult
		res, err = s.h.Exec(ctx, req.Argv, opts)
		resp.Exec = &execResult{Code: res.Code, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut}
	case opSignal, opKill:
		p, ok, issued := s.proc(req.Proc)
		switch {
		case !ok && issued && req.Op == opKill:
			// It exited and was forgotten before the client read its exit
			// report; as with hosts.Local, killing it is no error.
		case !ok && issued:
			err = fmt.Errorf("signal %s: process %d has exited", req.Signal, req.Proc)
		case !ok:
			err = fmt.Errorf("%s: no process %d", req.Op, req.Proc)
		case req.Op == opKill:
			err = p.Kill()
			// A client kills a process whose streams it did not all
			// attach only when it gives up on the spawn.
			s.update(req.Proc, func(sp *served) { sp.killed = true })
		default:
			err = p.Signal(req.Signal)
		}
	case opMkdir:
		err = fsys.Mkdir(ctx, req.Path, fs.FileMode(req.Perm), req.Recursive)
	case opReadDir:
		resp.Entries, err = fsys.ReadDir(ctx, req.Path)
	case opStat, opLstat:
		stat := fsys.Stat
		if req.Op == opLstat {
			stat = fsys.Lstat
		}
		var fi hosts.FileInfo
		if fi, err = stat(ctx, req.Path); err == nil {
			resp.Info = &wireFileInfo{Name: fi.Name, Size: fi.Size, Mode: uint32(fi.Mode), ModTime: fi.ModTime, IsDir: fi.IsDir, IsSymlink: fi.IsSymlink}
		}
	case opExists:
		resp.Bool, err = fsys.Exists(ctx, req.Path)
	case opRemove:
		err = fsys.Remove(ctx, req.Path, req.Recursive, req.Force)
	case opRename:
		err = fsys.Rename(ctx, req.Path, req.To)
	case opMkdtemp:
		resp.String, err = fsys.MkdirTemp(ctx, req.Path, req.To)
	case opSymlink:
		err = fsys.Symlink(ctx, req.To, req.Path)
	case opReadlink:
		resp.String, err = fsys.Readlink(ctx, req.Path)
	case opChmod:
		err = fsys.Chmod(ctx, req.Path, fs.FileMode(req.Perm))
	default:
		err = fmt.Errorf("unknown call %q", req.Op)
	}
	resp.Err = toWire(err)
	return resp
}

// spawn starts a process and keeps the stream to report its exit.
func (s *server) spawn(ctx context.Context, st *yamux.Stream, req request) {
	p, err := s.h.Spawn(ctx, hosts.SpawnSpec{Argv: req.Argv, Dir: req.Dir, Env: req.Env})
	if err != nil {
		_ = writeHeader(st, response{Err: toWire(err)})
		return
	}
	s.mu.Lock()
	s.last++
	id := s.last
	s.procs[id] = &served{p: p, attached: map[string]bool{}}
	s.mu.Unlock()
	if err := writeHeader(st, response{Proc: id, PID: p.Pid()}); err != nil {
		_ = p.Kill() // the client cannot know of it
		s.update(id, func(sp *served) { sp.killed = true })
	}
	code, err := p.Wait()
	s.update(id, func(sp *served) { sp.exited = true })
	_ = writeHeader(st, response{Exited: true, ExitCode: code, Err: toWire(err)})
}

// proc returns the process with id, if it is still known, and whether id
// was ever issued.
func (s *server) proc(id uint64) (p hosts.Process, ok, issued bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	issued = id != 0 && id <= s.last
	sp, ok := s.procs[id]
	if !ok {
		return nil, false, issued
	}
	return sp.p, true, issued
}

// update changes the record of process id and forgets it once nothing
// more can be asked of it.
func (s *server) update(id uint64, f func(*served)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, ok := s.procs[id]
	if !ok {
		return
	}
	f(sp)
	s.settle(id, sp)
}

// settle forgets process id once nothing more can be asked of it. s.mu is
// held.
func (s *server) settle(id uint64, sp *served) {
	if sp.exited && (len(sp.attached) == 3 || sp.killed) {
		delete(s.procs, id)
	}
}

// attach connects one of a process's standard streams to st.
func (s *server) attach(st *yamux.Stream, req request) {
	s.mu.Lock()
	sp, ok := s.procs[req.Proc]
	ok = ok && !sp.attached[req.Op] && !sp.killed
	if ok {
		sp.attached[req.Op] = true
		s.settle(req.Proc, sp)
	}
	s.mu.Unlock()
	if !ok {
		_ = writeHeader(st, response{Err: toWire(fmt.Errorf("%s: no process %d to attach", req.Op, req.Proc))})
		return
	}
	if err := writeHeader(st, response{}); err != nil {
		return
	}
	switch req.Op {
	case opStdin:
		_, _ = io.Copy(sp.p.Stdin(), st)
		_ = sp.p.Stdin().Close()
	case opStdout:
		_, _ = io.Copy(st, sp.p.Stdout())
	case opStderr:
		_, _ = io.Copy(st, sp.p.Stderr())
	}
}

// dial connects st to a TCP address on the host.
func (s *server) dial(ctx context.Context, st *yamux.Stream, req request) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, err := d.DialContext(dctx, "tcp", req.Addr)
	cancel()
	if err != nil {
		_ = writeHeader(st, response{Err: toWire(err)})
		return
	}
	defer c.Close()
	if err := writeHeader(st, response{}); err != nil {
		return
	}
	splice(st, c)
}

// splice copies both ways between a and b until both directions end, or
// one fails.
func splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	cp := func(dst, src io.ReadWriteCloser) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = src.Close()
		}
		done <- struct{}{}
	}
	// Both waited for below (done).
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
