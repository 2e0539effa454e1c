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

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
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
	Clock     lifecycle.Clock
	// Version is blaise-agent's.
	Version string
	// MaxConns caps the connections open at once; 0: DefaultMaxConns.
	MaxConns int
	// MaxConnsPerAddr caps those of one IP address; 0: no cap.
	MaxConnsPerAddr int
	// KeepAlive is how often a client's WebSocket is pinged, to find a
	// dead peer and keep proxies from closing it as idle; 0:
	// DefaultKeepAlive.
	KeepAlive time.Duration

	initOnce sync.Once
	engine   *engine.Engine // the lifecycle of every session
	mu       sync.Mutex
	runners  map[string]map[*runnerConn]bool // by agent
	procs    map[runnerproto.RunRef]*remoteProcess
	metrics  *serverMetrics
}

// Timeouts of the HTTP server: a request's header and body must arrive
// within theirs, and a connection between requests is closed after
// idleTimeout. WebSockets are not bound by them once upgraded; their
// keepalives find dead peers. Answers are not bounded (transcripts and
// event streams are long); the connection caps bound what slow readers
// hold.
const (
	headerTimeout = 10 * time.Second
	bodyTimeout   = time.Minute
	idleTimeout   = 2 * time.Minute
	// DefaultKeepAlive: see Server.KeepAlive.
	DefaultKeepAlive = 30 * time.Second
)

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.runners = map[string]map[*runnerConn]bool{}
		s.procs = map[runnerproto.RunRef]*remoteProcess{}
		s.metrics = s.newMetrics()
		s.Store.Observe = func(verb string, took time.Duration) { s.metrics.store.Observe(took, verb) }
		s.engine = &engine.Engine{
			Store:        s.Store,
			Locks:        &engine.MemLocks{},
			Launcher:     s,
			TimeoutGrace: s.lease(),
			// Runners come back within the lease with the runs they have.
			AdoptUntil: s.clock().Now().Add(s.lease()),
			StopGrace:  s.StopGrace,
			Clock:      s.Clock,
			Log:        s.log(),
			Settled: func(r *lifecycle.Record) {
				s.log().Debug("session settled", "session", r.ID, "state", r.State, "reason", r.EndReason)
				s.runSettled(r)
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

func (s *Server) clock() lifecycle.Clock {
	if s.Clock == nil {
		return lifecycle.RealClock{}
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
	// Serve returns once they have ended: the caller closes the store
	// after.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.engine.Keep(ctx) })
	wg.Go(func() { s.cutRevoked(ctx) })
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	ln = &limitListener{Listener: ln, total: maxConns, perAddr: s.MaxConnsPerAddr, opened: func(d int) { s.metrics.conns.Add(float64(d)) }}
	// Shutdown does not wait for the handlers of hijacked connections (the
	// runners' and clients' WebSockets): they end with ctx, and Serve
	// waits for them.
	var handlers sync.WaitGroup
	defer handlers.Wait()
	h := s.Handler(ctx)
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		h.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: counted, ReadHeaderTimeout: headerTimeout, ReadTimeout: bodyTimeout, IdleTimeout: idleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { // ends with hs, closed or shut down below
		if cert != "" {
			done <- hs.ServeTLS(ln, cert, key)
		} else {
			done <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		cancel()
		hs.Close()
		return err
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	err := hs.Shutdown(shutdown)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	<-done
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
