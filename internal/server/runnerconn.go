package server

import (
	"context"
	"fmt"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/hashicorp/yamux"
)

// runnerConn is a connected runner.
type runnerConn struct {
	runners *runners
	agent   string
	name    string
	id      string // its credential's
	build   string // the runner's blaise-agent version
	// config and dir are the runner's blaise.star and where its runs run,
	// as it said in its hello; "" when it did not.
	config, dir string
	// actions are those its chain offers, as it said in its hello.
	actions []api.Action
	// version is the runner protocol's: from 4 on, a run's messages toward
	// the client come in its transcript appends.
	version int
	mux     *yamux.Session
	frames  *runnerproto.Conn
	gone    chan struct{} // closed when the connection ended
	// welcomed is closed once the runner was sent its welcome, the first
	// frame it reads.
	welcomed chan struct{}

	mu       sync.Mutex
	draining bool
	procs    map[runnerproto.RunRef]*remoteProcess
}

// serve handles the runner's frames and streams until its connection ends.
func (rc *runnerConn) serve(ctx context.Context) {
	accepted := make(chan struct{})
	// Waited for below, once mux is closed.
	go func() {
		defer close(accepted)
		rc.acceptStreams()
	}()
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
			rc.runners.Log.Warn("an unknown frame from a runner", "runner", rc.name, "type", f.Kind)
		}
	}
	rc.mux.Close()
	<-accepted // ends with mux
	close(rc.gone)
	rc.runners.remove(rc)
	rc.runners.Log.Info("runner disconnected", "agent", rc.agent, "runner", rc.name)
	rc.left(ctx)
}

// left records that the runner was last seen now, as its connection ends;
// a server shutting down (ctx done) still records it.
func (rc *runnerConn) left(ctx context.Context) {
	if err := rc.runners.Store.RunnerSeen(context.WithoutCancel(ctx), rc.id); err != nil {
		rc.runners.Log.Warn("recording when a runner was last seen", "runner", rc.name, "err", err)
	}
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
		// Ends with its header read: at the latest as mux closes the stream.
		go func() {
			h, err := runnerproto.ReadHeader(st)
			if err != nil {
				rc.runners.Log.Warn("a bad stream from a runner", "runner", rc.name, "err", err)
				st.Close()
				return
			}
			p := rc.proc(&h.RunRef)
			if p == nil || !p.attach(rc, h.Channel, st) {
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
	rc.runners.Log.Info("runner draining", "agent", rc.agent, "runner", rc.name, "runs", len(refs))
	for _, ref := range refs {
		if l := rc.runners.engine.Running(ref.Session); l != nil && l.Run == ref.Run {
			// Ends once the run has stopped as idle.
			go func() {
				if err := l.StopIdle(); err != nil {
					rc.runners.Log.Warn("stopping a draining runner's run", "session", ref.Session, "err", err)
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

// takeBack takes over a run the runner still has that the server does not
// know: one that began before the server restarted (Engine.Adopt). Its
// session must be of the runner's agent, its last run on this runner, and
// its record must show the run in progress; it reports whether the server
// takes the run (the runner stops the others). This runner is the one of
// the record's credential id: another runner of the same name takes
// nothing. The engine adopts the run once its streams are there, before
// its store calls are answered; should it no longer be the session's
// then, the server lets it go, and the runner stops it after the lease.
func (rc *runnerConn) takeBack(ctx context.Context, ref runnerproto.RunRef) bool {
	rec, err := rc.runners.Store.Session(ctx, ref.Session)
	if err == nil && (rec.AgentName != rc.agent || rec.RunnerID != rc.id) {
		err = fmt.Errorf("session %s is of agent %s, last run on runner %s of credential %s; this runner is %s of credential %s, of agent %s", ref.Session, rec.AgentName, rec.Runner, rec.RunnerID, rc.name, rc.id, rc.agent)
	}
	if err == nil {
		err = rc.runners.engine.Adoptable(ctx, ref.Session, ref.Run)
	}
	if err != nil {
		rc.runners.Log.Warn("a runner's run is not adopted", "runner", rc.name, "run", ref.Run, "err", err)
		return false
	}
	// A turn or a teardown: an action run is not adopted, its session
	// being paused (Adoptable).
	p, first := rc.newProcess(ref, lifecycle.ResumeRun)
	// Ends with the run's streams (the lease at most), then hands the run to the engine.
	go func() {
		err := rc.streams(first, rc.runners.clock.After(rc.runners.lease))
		if err == nil {
			// Adopted first: a run the sweep settled meanwhile writes
			// nothing.
			_, err = rc.runners.engine.Adopt(ctx, ref.Session, ref.Run, p)
		}
		if err == nil {
			p.serveStore()
		}
		if err != nil {
			rc.drop(p, err)
			rc.runners.Log.Warn("a runner's run is not adopted", "runner", rc.name, "run", ref.Run, "err", err)
			return
		}
		rc.runners.Log.Info("run adopted after a restart", "session", ref.Session, "run", ref.Run, "runner", rc.name)
	}()
	return true
}
