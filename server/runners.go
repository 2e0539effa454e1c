package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/runnerproto"
	"github.com/blaiseagent/blaise-agent/runstore"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/hashicorp/yamux"
)

// runnerConn is a connected runner.
type runnerConn struct {
	s      *Server
	agent  string
	name   string
	mux    *yamux.Session
	frames *runnerproto.Conn
	gone   chan struct{} // closed when the connection ended

	mu       sync.Mutex
	draining bool
	procs    map[runnerproto.RunRef]*remoteProcess
}

// serve handles the runner's frames and streams until its connection ends.
func (rc *runnerConn) serve(ctx context.Context) {
	go rc.acceptStreams()
	for {
		f, err := rc.frames.Receive()
		if err != nil {
			break
		}
		switch f.Kind {
		case runnerproto.KindLaunched:
			if p := rc.proc(f.Run); p != nil {
				var err error
				if f.Error != "" {
					err = fmt.Errorf("runner %s: %s", rc.name, f.Error)
				}
				p.launched <- err
			}
		case runnerproto.KindExited:
			if p := rc.proc(f.Run); p != nil {
				p.exit(f.Status)
			}
		case runnerproto.KindDrain:
			rc.drain()
		default:
			rc.s.log().Warn("an unknown frame from a runner", "runner", rc.name, "type", f.Kind)
		}
	}
	rc.mux.Close()
	close(rc.gone)
	rc.s.removeRunner(rc)
	rc.s.log().Info("runner disconnected", "agent", rc.agent, "runner", rc.name)
}

func (rc *runnerConn) proc(ref *runnerproto.RunRef) *remoteProcess {
	if ref == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.procs[*ref]
}

// acceptStreams routes the streams the runner opens to their runs.
func (rc *runnerConn) acceptStreams() {
	for {
		st, err := rc.mux.AcceptStream()
		if err != nil {
			return
		}
		go func() {
			h, err := runnerproto.ReadHeader(st)
			if err != nil {
				rc.s.log().Warn("a bad stream from a runner", "runner", rc.name, "err", err)
				st.Close()
				return
			}
			p := rc.proc(&h.RunRef)
			if p == nil || !p.attach(h.Channel, st) {
				st.Close()
			}
		}()
	}
}

// drain stops the runner's live runs as idle: it is leaving (SIGTERM).
func (rc *runnerConn) drain() {
	rc.mu.Lock()
	rc.draining = true
	refs := make([]runnerproto.RunRef, 0, len(rc.procs))
	for ref := range rc.procs {
		refs = append(refs, ref)
	}
	rc.mu.Unlock()
	rc.s.log().Info("runner draining", "agent", rc.agent, "runner", rc.name, "runs", len(refs))
	for _, ref := range refs {
		if l := rc.s.engine.Running(ref.Session); l != nil && l.Run == ref.Run {
			go func() {
				if err := l.StopIdle(); err != nil {
					rc.s.log().Warn("stopping a draining runner's run", "session", ref.Session, "err", err)
				}
			}()
		}
	}
}

func (rc *runnerConn) takesRuns() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	select {
	case <-rc.gone:
		return false
	default:
	}
	return !rc.draining
}

// launch starts a run on the runner and waits for its streams.
func (rc *runnerConn) launch(run blaise.Launch) (*remoteProcess, error) {
	ref := runnerproto.RunRef{Session: run.Record.ID, Run: run.Record.Runs}
	p := &remoteProcess{
		rc: rc, ref: ref,
		streams:  map[runnerproto.Channel]net.Conn{},
		ready:    make(chan struct{}),
		launched: make(chan error, 1),
		exited:   make(chan struct{}),
	}
	rc.mu.Lock()
	rc.procs[ref] = p
	rc.mu.Unlock()
	forget := func(err error) (*remoteProcess, error) {
		rc.mu.Lock()
		delete(rc.procs, ref)
		rc.mu.Unlock()
		p.closeStreams()
		return nil, err
	}
	if err := rc.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunch, Launch: &runnerproto.Launch{RunRef: ref, Flags: run.Flags}}); err != nil {
		return forget(fmt.Errorf("runner %s: %w", rc.name, err))
	}
	timeout := rc.s.clock().After(rc.s.lease())
	select {
	case err := <-p.launched:
		if err != nil {
			return forget(err)
		}
	case <-rc.gone:
		return forget(fmt.Errorf("runner %s left while starting the run", rc.name))
	case <-timeout:
		return forget(fmt.Errorf("runner %s did not start the run within %s", rc.name, rc.s.lease()))
	}
	select {
	case <-p.ready:
	case <-rc.gone:
		return forget(fmt.Errorf("runner %s left while starting the run", rc.name))
	case <-timeout:
		return forget(fmt.Errorf("runner %s did not open the run's streams within %s", rc.name, rc.s.lease()))
	}
	store := &runstore.Server{Store: rc.s.Store, Session: ref.Session, MayWrite: p.mayWrite}
	go func() {
		if err := store.Serve(context.Background(), p.streams[runnerproto.ChannelStore]); err != nil {
			rc.s.log().Debug("a run's store connection ended", "session", ref.Session, "err", err)
		}
	}()
	return p, nil
}

// remoteProcess is a session process on a runner, as the engine sees it.
type remoteProcess struct {
	rc       *runnerConn
	ref      runnerproto.RunRef
	launched chan error
	ready    chan struct{} // every stream attached
	exited   chan struct{}

	mu      sync.Mutex
	streams map[runnerproto.Channel]net.Conn
	status  string
	failed  error // the run was failed: it may not write any more
}

func (p *remoteProcess) attach(ch runnerproto.Channel, st net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.streams[ch]; dup || p.failed != nil {
		return false
	}
	p.streams[ch] = st
	if len(p.streams) == len(runnerproto.Channels) {
		close(p.ready)
	}
	return true
}

func (p *remoteProcess) closeStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.streams {
		st.Close()
	}
}

func (p *remoteProcess) exit(status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
	default:
		p.status = status
		close(p.exited)
	}
}

func (p *remoteProcess) stream(ch runnerproto.Channel) net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams[ch]
}

func (p *remoteProcess) Stdin() io.WriteCloser       { return p.stream(runnerproto.ChannelStdin) }
func (p *remoteProcess) Stdout() io.ReadCloser       { return p.stream(runnerproto.ChannelStdout) }
func (p *remoteProcess) Control() io.ReadWriteCloser { return p.stream(runnerproto.ChannelControl) }
func (p *remoteProcess) PID() int                    { return 0 }

// Wait waits for the runner to report the process's end. A runner that is
// gone has the lease to come back; then the run is failed, and may no
// longer write (L5).
func (p *remoteProcess) Wait() error {
	defer p.forget()
	select {
	case <-p.exited:
		return p.exitErr()
	case <-p.rc.gone:
	}
	select {
	case <-p.exited:
		return p.exitErr()
	case <-p.rc.s.clock().After(p.rc.s.lease()):
	}
	err := fmt.Errorf("runner %s is gone and did not come back within %s", p.rc.name, p.rc.s.lease())
	p.mu.Lock()
	p.failed = err
	p.mu.Unlock()
	p.closeStreams()
	return err
}

func (p *remoteProcess) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == "" || p.status == "exit status 0" {
		return nil
	}
	return errors.New(p.status)
}

func (p *remoteProcess) forget() {
	p.rc.mu.Lock()
	defer p.rc.mu.Unlock()
	delete(p.rc.procs, p.ref)
}

// mayWrite refuses the writes of a run the server has failed.
func (p *remoteProcess) mayWrite() error {
	p.mu.Lock()
	failed := p.failed
	p.mu.Unlock()
	if failed != nil {
		return fmt.Errorf("session %s: run %d was failed (%v): its writes are refused", p.ref.Session, p.ref.Run, failed)
	}
	run, _, err := p.rc.s.currentRun(p.ref.Session)
	if err != nil {
		return err
	}
	if run != p.ref.Run {
		return fmt.Errorf("session %s: run %d is over (the session is at run %d): its writes are refused", p.ref.Session, p.ref.Run, run)
	}
	return nil
}

// Signal asks the runner to signal the run's processes.
func (p *remoteProcess) Signal(kill bool) {
	_ = p.rc.frames.Send(runnerproto.Frame{Kind: runnerproto.KindSignal, Run: &p.ref, Kill: kill})
}

// Launch starts a run on a runner of the session's agent: the runner of
// its last run when it is connected (§9), else the one with fewest runs.
func (s *Server) Launch(run blaise.Launch) (blaise.Process, error) {
	rc := s.pickRunner(run.Record.AgentName, run.Record.Runner)
	if rc == nil {
		return nil, fmt.Errorf("session %s: no runner of agent %s is connected (start one with `blaise-agent listen --agent %s`)", run.Record.ID, run.Record.AgentName, run.Record.AgentName)
	}
	if _, err := s.Store.UpdateSession(run.Record.ID, func(r *session.Record) error { r.Runner = rc.name; return nil }); err != nil {
		return nil, err
	}
	p, err := rc.launch(run)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", run.Record.ID, err)
	}
	return p, nil
}

func (s *Server) pickRunner(agent, prefer string) *runnerConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *runnerConn
	bestRuns := 0
	for rc := range s.runners[agent] {
		if !rc.takesRuns() {
			continue
		}
		if rc.name == prefer {
			return rc
		}
		rc.mu.Lock()
		n := len(rc.procs)
		rc.mu.Unlock()
		if best == nil || n < bestRuns {
			best, bestRuns = rc, n
		}
	}
	return best
}
