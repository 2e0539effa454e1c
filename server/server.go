// Package server is the reference Blaise server (`blaise-agent serve`):
// the control plane of named agents, with the lifecycle engine, a SQL
// store, the runners that run sessions (runnerproto) and the clients that
// reach them with ACP.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/runnerproto"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/blaiseagent/blaise-agent/sqlstore"
	"github.com/charmbracelet/log"
)

// DefaultLease is how long a run whose runner is gone, or that ignores a
// timeout stop, has before it is failed (L5).
const DefaultLease = time.Minute

// Server is a Blaise server.
type Server struct {
	Store *sqlstore.Store
	Log   *log.Logger
	// Lease: see DefaultLease; 0 means it.
	Lease time.Duration
	// StopGrace is how long a handler still attaching when its run is
	// stopped may take to reach next() (Engine.StopGrace); 0:
	// session.DefaultStopGrace.
	StopGrace time.Duration
	Clock     session.Clock
	// Version is blaise-agent's.
	Version string

	initOnce sync.Once
	engine   *blaise.Engine // the lifecycle of every session
	mu       sync.Mutex
	runners  map[string]map[*runnerConn]bool // by agent
	procs    map[runnerproto.RunRef]*remoteProcess
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.runners = map[string]map[*runnerConn]bool{}
		s.procs = map[runnerproto.RunRef]*remoteProcess{}
		s.engine = &blaise.Engine{
			Store:        s.Store,
			Locks:        &blaise.MemLocks{},
			Launcher:     s,
			TimeoutGrace: s.lease(),
			// Runners come back within the lease with the runs they have.
			AdoptUntil: s.clock().Now().Add(s.lease()),
			StopGrace:  s.StopGrace,
			Clock:      s.Clock,
			Log:        s.log(),
			Settled: func(r *session.Record) {
				s.log().Debug("session settled", "session", r.ID, "state", r.State, "reason", r.EndReason)
			},
		}
	})
}

func (s *Server) log() *log.Logger {
	if s.Log == nil {
		return log.Default()
	}
	return s.Log
}

func (s *Server) clock() session.Clock {
	if s.Clock == nil {
		return session.RealClock{}
	}
	return s.Clock
}

func (s *Server) lease() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return DefaultLease
}

func (s *Server) addRunner(rc *runnerConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runners[rc.agent] == nil {
		s.runners[rc.agent] = map[*runnerConn]bool{}
	}
	s.runners[rc.agent][rc] = true
}

func (s *Server) removeRunner(rc *runnerConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runners[rc.agent], rc)
}

// Serve serves on ln until ctx is done; with cert and key, over TLS. The
// lifecycle engine's timers run meanwhile: expiry and teardown retries
// (L2, L6), and the cutting of revoked runners' connections.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert, key string) error {
	s.init()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.engine.Keep(ctx)
	go s.cutRevoked(ctx)
	hs := &http.Server{Handler: s.Handler(ctx), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() {
		if cert != "" {
			done <- hs.ServeTLS(ln, cert, key)
		} else {
			done <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	err := hs.Shutdown(shutdown)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
