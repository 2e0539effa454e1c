package listen

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/blaiseagent/blaise-agent/runnerproto"
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
			go c.launch(*f.Launch)
		case runnerproto.KindSignal:
			if f.Run != nil {
				c.r.mu.Lock()
				rn := c.r.runs[*f.Run]
				c.r.mu.Unlock()
				if rn != nil {
					rn.signal(f.Kill)
				}
			}
		default:
			c.r.Log.Warn("an unknown frame from the server", "type", f.Kind)
		}
	}
}

// run is a session process of this runner.
type run struct {
	ref  runnerproto.RunRef
	cmd  *exec.Cmd
	done chan struct{}
}

func (rn *run) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-rn.cmd.Process.Pid, sig)
}

// launch starts the session process of l and carries its streams.
func (c *conn) launch(l runnerproto.Launch) {
	r := c.r
	fail := func(err error) {
		r.Log.Error("starting a run failed", "session", l.Session, "run", l.Run, "err", err)
		_ = c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &l.RunRef, Error: err.Error()})
	}
	streams := map[runnerproto.Channel]net.Conn{}
	closeAll := func() {
		for _, s := range streams {
			s.Close()
		}
	}
	for _, ch := range runnerproto.Channels {
		s, err := c.mux.OpenStream()
		if err == nil {
			err = runnerproto.WriteHeader(s, runnerproto.StreamHeader{RunRef: l.RunRef, Channel: ch})
		}
		if err != nil {
			closeAll()
			fail(fmt.Errorf("opening its %s stream: %w", ch, err))
			return
		}
		streams[ch] = s
	}
	control, controlTheirs, err := socketPair("control")
	if err != nil {
		closeAll()
		fail(err)
		return
	}
	store, storeTheirs, err := socketPair("store")
	if err != nil {
		closeAll()
		control.Close()
		controlTheirs.Close()
		fail(err)
		return
	}
	args := append(append([]string(nil), r.Command[1:]...), "--store-fd", "4", "--config", r.ConfigPath)
	args = append(args, l.Flags...)
	cmd := exec.Command(r.Command[0], args...)
	// Pipes of our own: cmd.Wait must not close the output before it is sent.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		closeAll()
		fail(err)
		return
	}
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll()
		stdinR.Close()
		stdin.Close()
		fail(err)
		return
	}
	theirs := []*os.File{stdinR, stdoutW, controlTheirs, storeTheirs}
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	cmd.Dir, cmd.Env, cmd.Stderr = r.Dir, r.Env, r.Stderr
	cmd.ExtraFiles = []*os.File{controlTheirs, storeTheirs} // fd 3, fd 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	for _, f := range theirs {
		f.Close()
	}
	if err != nil {
		closeAll()
		for _, f := range []*os.File{control, store, stdin, stdout} {
			f.Close()
		}
		fail(fmt.Errorf("starting the session process: %w", err))
		return
	}
	rn := &run{ref: l.RunRef, cmd: cmd, done: make(chan struct{})}
	r.mu.Lock()
	r.runs[l.RunRef] = rn
	r.mu.Unlock()
	if err := c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &l.RunRef}); err != nil {
		rn.signal(false)
	}
	c.carry(rn, streams, stdin, stdout, control, store)
}

// carry copies between the session process and its streams until the
// process has ended and its output is sent, then reports its exit.
func (c *conn) carry(rn *run, streams map[runnerproto.Channel]net.Conn, stdin, stdout, control, store *os.File) {
	outDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(stdin, streams[runnerproto.ChannelStdin])
		stdin.Close()
	}()
	go func() {
		_, _ = io.Copy(streams[runnerproto.ChannelStdout], stdout)
		streams[runnerproto.ChannelStdout].Close()
		// The stream is gone: what the process still writes is drained, so
		// that it never blocks on a full pipe and can end.
		_, _ = io.Copy(io.Discard, stdout)
		close(outDone)
	}()
	for _, p := range []struct {
		local  *os.File
		stream net.Conn
	}{{control, streams[runnerproto.ChannelControl]}, {store, streams[runnerproto.ChannelStore]}} {
		go func() { _, _ = io.Copy(p.stream, p.local); p.stream.Close() }()
		go func() { _, _ = io.Copy(p.local, p.stream); p.local.Close() }()
	}
	err := rn.cmd.Wait()
	<-outDone
	stdout.Close()
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	r := c.r
	r.mu.Lock()
	delete(r.runs, rn.ref)
	r.mu.Unlock()
	close(rn.done)
	for _, s := range streams {
		s.Close()
	}
	if err := c.frames.Send(runnerproto.Frame{Kind: runnerproto.KindExited, Run: &rn.ref, Status: status}); err != nil {
		r.Log.Debug("reporting a run's end failed", "session", rn.ref.Session, "err", err)
	}
}

func socketPair(name string) (mine, theirs *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s channel: %w", name, err)
	}
	return os.NewFile(uintptr(fds[0]), name), os.NewFile(uintptr(fds[1]), name), nil
}
