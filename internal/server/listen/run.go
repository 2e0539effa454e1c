package listen

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/hashicorp/yamux"
)

// conn is one connection to the server.
type conn struct {
	r      *Runner
	mux    *yamux.Session
	frames *runnerproto.Conn
}

// receive handles the server's frames until the connection ends.
func (c *conn) receive() error {
	for {
		f, err := c.frames.Receive()
		if err != nil {
			return err
		}
		switch f.Kind {
		case runnerproto.KindLaunch:
			if f.Launch == nil {
				return fmt.Errorf("runner protocol: a launch without a run")
			}
			// A launch: the run it starts is waited for by Runner.Run (waitRuns).
			go c.launch(*f.Launch)
		case runnerproto.KindSignal:
			if f.Run != nil {
				if rn := c.r.run(*f.Run); rn != nil {
					rn.signal(f.Kill)
				}
			}
		default:
			c.r.Log.Warn("an unknown frame from the server", "type", f.Kind)
		}
	}
}

func (r *Runner) run(ref runnerproto.RunRef) *run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[ref]
}

// run is a session process of this runner. Its streams belong to one
// connection at a time: when the connection breaks, the run waits, its
// output held back, for the runner to reconnect and the server to take it
// back; given up, it is stopped, and its output drained.
type run struct {
	r    *Runner
	ref  runnerproto.RunRef
	cmd  *exec.Cmd
	done chan struct{} // closed once the server knows it ended, or it was given up

	// The process's ends: what it reads (stdin, control, store) and what
	// it writes (stdout, control, store).
	local map[runnerproto.Channel]*os.File
	// direct: the run's store is on connections of its own (protocol 7),
	// not among its streams; its local store end is the pipe its ticket
	// came on.
	direct bool

	mu      sync.Mutex
	c       *conn // the connection it is attached to; nil while detached
	streams map[runnerproto.Channel]net.Conn
	ended   map[runnerproto.Channel]bool // its output on the channel ended
	changed chan struct{}                // closed, and replaced, when c changes or it is given up
	given   bool                         // given up
	// store passes on its store, across its store streams: whole frames,
	// from the process's OpResync of each new stream.
	store runstore.Relay
}

func (rn *run) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-rn.cmd.Process.Pid, sig)
}

// launch starts the session process of l and attaches it to c.
func (c *conn) launch(l runnerproto.Launch) {
	r := c.r
	rn, err := r.start(l)
	if err != nil {
		r.Log.Error("starting a run failed", "session", l.Session, "run", l.Run, "err", err)
		_ = c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &l.RunRef, Error: err.Error()})
		return
	}
	// A run the server did not get the streams of is the server's to
	// forget, and ours to stop.
	if err := c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &l.RunRef}); err != nil {
		rn.giveUp()
		return
	}
	if err := rn.attach(c); err != nil {
		r.Log.Warn("attaching a run failed", "session", l.Session, "run", l.Run, "err", err)
		rn.giveUp()
	}
}

// start starts the session process of l.
func (r *Runner) start(l runnerproto.Launch) (*run, error) {
	var mine, theirs []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pair := func(name string) error {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s channel: %w", name, err)
		}
		// Our end non-blocking, so that os.File polls it: closing it then
		// ends a read in progress, and the process sees the end at once.
		if err := syscall.SetNonblock(fds[0], true); err != nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			return fmt.Errorf("%s channel: %w", name, err)
		}
		mine = append(mine, os.NewFile(uintptr(fds[0]), name))
		theirs = append(theirs, os.NewFile(uintptr(fds[1]), name))
		return nil
	}
	pipe := func(theirsReads bool) error {
		rd, wr, err := os.Pipe()
		if err != nil {
			return err
		}
		if theirsReads {
			mine, theirs = append(mine, wr), append(theirs, rd)
		} else {
			mine, theirs = append(mine, rd), append(theirs, wr)
		}
		return nil
	}
	// Pipes of our own: cmd.Wait must not close the output before it is sent.
	// A direct run's fd 4 is a pipe its ticket comes on.
	store := func() error { return pair("store") }
	if l.Ticket != "" {
		store = func() error { return pipe(true) }
	}
	for _, mk := range []func() error{func() error { return pipe(true) }, func() error { return pipe(false) }, func() error { return pair("control") }, store} {
		if err := mk(); err != nil {
			closeAll(mine)
			closeAll(theirs)
			return nil, err
		}
	}
	// Protocol 4: the run's messages toward the client go in its
	// transcript's records.
	args := append(append([]string(nil), r.Command[1:]...), "--store-fd", "4", "--carry", "--config", r.ConfigPath)
	if l.Ticket != "" {
		args = append(args, "--store-server", r.Server)
	}
	cmd := exec.Command(r.Command[0], append(args, l.Flags...)...)
	cmd.Stdin, cmd.Stdout = theirs[0], theirs[1]
	cmd.ExtraFiles = theirs[2:] // fd 3: control, fd 4: store
	cmd.Dir, cmd.Env, cmd.Stderr = r.Dir, r.Env, r.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Start()
	closeAll(theirs)
	if err != nil {
		closeAll(mine)
		return nil, fmt.Errorf("starting the session process: %w", err)
	}
	rn := &run{
		r: r, ref: l.RunRef, cmd: cmd, done: make(chan struct{}),
		local: map[runnerproto.Channel]*os.File{
			runnerproto.ChannelStdin: mine[0], runnerproto.ChannelStdout: mine[1],
			runnerproto.ChannelControl: mine[2], runnerproto.ChannelStore: mine[3],
		},
		direct: l.Ticket != "",
		ended:  map[runnerproto.Channel]bool{}, changed: make(chan struct{}),
	}
	outs := []runnerproto.Channel{runnerproto.ChannelStdout, runnerproto.ChannelControl, runnerproto.ChannelStore}
	if rn.direct {
		// The ticket, a line, fits in the pipe: the write does not wait.
		// The pipe stays open while the runner has the run (closeInputs):
		// its end ends the process's store.
		if _, err := io.WriteString(mine[3], l.Ticket+"\n"); err != nil {
			closeAll(mine)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			return nil, fmt.Errorf("the run's ticket: %w", err)
		}
		outs = outs[:2]
	}
	r.mu.Lock()
	r.runs[l.RunRef] = rn
	r.mu.Unlock()
	var pumps sync.WaitGroup
	for _, ch := range outs {
		pumps.Add(1)
		// Waited for below (pumps).
		go func() {
			defer pumps.Done()
			rn.pump(ch)
		}()
	}
	// Ends with the session process; it ends the run (report), which Runner.Run waits for (waitRuns).
	go func() {
		err := cmd.Wait()
		pumps.Wait()
		status := "exit status 0"
		if err != nil {
			status = err.Error()
		}
		rn.report(status)
	}()
	return rn, nil
}

// attach opens the run's streams on c.
func (rn *run) attach(c *conn) error {
	streams := map[runnerproto.Channel]net.Conn{}
	for _, ch := range rn.channels() {
		st, err := c.mux.OpenStream()
		if err == nil {
			err = runnerproto.WriteHeader(st, runnerproto.StreamHeader{RunRef: rn.ref, Channel: ch})
		}
		if err != nil {
			for _, s := range streams {
				s.Close()
			}
			return fmt.Errorf("opening its %s stream: %w", ch, err)
		}
		streams[ch] = st
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.c, rn.streams = c, streams
	for ch, ended := range rn.ended {
		if ended {
			streams[ch].Close() // what came before is sent; the server sees its end
		}
	}
	for _, ch := range []runnerproto.Channel{runnerproto.ChannelStdin, runnerproto.ChannelControl} {
		// Both end with the stream or the run's end of it.
		go rn.pull(ch, streams[ch])
	}
	if !rn.direct {
		rn.store.Attach(rn.local[runnerproto.ChannelStore], streams[runnerproto.ChannelStore], rn.storeEnded)
	}
	close(rn.changed)
	rn.changed = make(chan struct{})
	return nil
}

// channels are the run's streams on a connection.
func (rn *run) channels() []runnerproto.Channel {
	if rn.direct {
		return runnerproto.RunChannels(runnerproto.Version)
	}
	return runnerproto.Channels
}

// detach lets the run go of c, whose connection broke. The run waits the
// lease for another; then it is given up.
func (rn *run) detach(c *conn) {
	rn.mu.Lock()
	if rn.c != c {
		rn.mu.Unlock()
		return
	}
	rn.c, rn.streams = nil, nil
	close(rn.changed)
	rn.changed = make(chan struct{})
	changed := rn.changed
	rn.mu.Unlock()
	// Ends with the run, its re-attachment, or the lease.
	go func() {
		select {
		case <-changed:
		case <-rn.done:
		case <-time.After(rn.r.lease()):
			rn.r.Log.Warn("the server did not adopt the run in time: stopping it", "session", rn.ref.Session, "run", rn.ref.Run)
			rn.giveUp()
		}
	}()
}

// giveUp stops a run the server does not have any more: its output is
// drained from now on, and its input, control channel and store end, so
// that nothing it waits for keeps it.
func (rn *run) giveUp() {
	rn.mu.Lock()
	if rn.given {
		rn.mu.Unlock()
		return
	}
	rn.given = true
	close(rn.changed)
	rn.changed = make(chan struct{})
	rn.mu.Unlock()
	rn.closeInputs()
	rn.signal(false)
}

// closeInputs closes the process's ends of what it reads: its input,
// control channel and store (of a direct run, the pipe of its ticket).
func (rn *run) closeInputs() {
	for _, ch := range []runnerproto.Channel{runnerproto.ChannelStdin, runnerproto.ChannelControl, runnerproto.ChannelStore} {
		rn.local[ch].Close()
	}
}

// stream returns the stream of ch in use, waiting while the run is
// detached; nil once the run is given up. For the store, f is the frame to
// go on it, and pass says whether it does: not while the stream waits for
// the process's OpResync, which f may be.
func (rn *run) stream(ch runnerproto.Channel, f *runstore.Frame) (c *conn, st net.Conn, pass bool) {
	for {
		rn.mu.Lock()
		c, st, given, changed := rn.c, rn.streams[ch], rn.given, rn.changed
		// Under rn.mu: the stream and the generation Pass tells f by are
		// those of one attachment.
		pass := c != nil && (f == nil || rn.store.Pass(*f))
		rn.mu.Unlock()
		if given {
			return nil, nil, false
		}
		if c != nil {
			return c, st, pass
		}
		<-changed
	}
}

// pump sends what the process writes on ch to the server, across
// reconnections; a write cut by a broken connection goes on with the next.
// The store is passed on in whole calls (pumpStore).
func (rn *run) pump(ch runnerproto.Channel) {
	local := rn.local[ch]
	if ch == runnerproto.ChannelStore {
		rn.pumpStore()
		rn.endOutput(ch)
		return
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := local.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			c, st, _ := rn.stream(ch, nil)
			if st == nil {
				break // given up: drained
			}
			w, werr := st.Write(b)
			b = b[w:]
			if werr != nil {
				// Its connection broke, or the server let the run go: it
				// waits for the next attachment, or is given up.
				rn.detach(c)
			}
		}
		if err != nil {
			break
		}
	}
	if ch == runnerproto.ChannelStdout {
		local.Close()
	}
	rn.endOutput(ch)
}

// endOutput closes the stream of ch in use: the process's output on it
// ended, and was passed on.
func (rn *run) endOutput(ch runnerproto.Channel) {
	rn.mu.Lock()
	rn.ended[ch] = true
	if st := rn.streams[ch]; st != nil {
		st.Close()
	}
	rn.mu.Unlock()
}

// pumpStore passes the process's store calls on to the server, whole: a
// call whose write fails with a broken connection is dropped, and so is
// every call the process sends after it until its OpResync of the next
// stream, after which it sends again every call not answered.
func (rn *run) pumpStore() {
	fr := runstore.NewFrameReader(rn.local[runnerproto.ChannelStore])
	for {
		f, err := fr.Next()
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) {
				rn.r.Log.Warn("a run's store calls", "session", rn.ref.Session, "run", rn.ref.Run, "err", err)
			}
			return
		}
		c, st, pass := rn.stream(runnerproto.ChannelStore, &f)
		if st == nil {
			continue // given up: drained
		}
		if !pass {
			continue // sent again after the OpResync to come
		}
		if _, err := st.Write(f.Bytes); err != nil {
			rn.detach(c)
		}
	}
}

// storeEnded logs what ended the reading of a store stream's answers
// (runstore.Relay.Attach) when it is not a cut: a line too long, a bad
// line.
func (rn *run) storeEnded(err error) {
	if err != nil && !cut(err) {
		rn.r.Log.Warn("a run's store answers", "session", rn.ref.Session, "run", rn.ref.Run, "err", err)
	}
}

// cut reports whether err ends a store stream that its connection cut
// (or that the run closed), not one with a line the runner could not read.
func cut(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, yamux.ErrStreamClosed) || errors.Is(err, yamux.ErrConnectionReset) || errors.Is(err, yamux.ErrSessionShutdown)
}

// pull passes what the server sends on st to the process until the
// stream ends: with its connection, or once the run is over.
func (rn *run) pull(ch runnerproto.Channel, st net.Conn) {
	_, _ = io.Copy(rn.local[ch], st)
}

// report tells the server that the process ended, on the connection the
// run is attached to, once it is.
func (rn *run) report(status string) {
	rn.closeInputs()
	for {
		c, _, _ := rn.stream(runnerproto.ChannelStdout, nil)
		if c == nil {
			break // given up
		}
		if err := c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindExited, Run: &rn.ref, Status: status}); err == nil {
			break
		}
		rn.detach(c)
	}
	rn.r.mu.Lock()
	delete(rn.r.runs, rn.ref)
	rn.r.mu.Unlock()
	rn.mu.Lock()
	for _, st := range rn.streams {
		st.Close()
	}
	rn.mu.Unlock()
	close(rn.done)
}
