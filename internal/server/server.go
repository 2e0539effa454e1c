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

// Server is a Blaise server. Its parts, each of one job, are made from its
// fields at its first Handler or Serve, and its handler routes to them.
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

	initOnce  sync.Once
	engine    *engine.Engine // the lifecycle of every session
	runners   *runners       // their connections; the engine's launcher
	resources *resources     // the API's agents and sessions
	clients   *clients       // ACP to the agents' clients
	ops       *ops           // health, readiness, metrics
	metrics   *serverMetrics // what the parts count
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

// init makes the engine and the parts, which read the fields they take
// then (KeepAlive is read per connection).
func (s *Server) init() {
	s.initOnce.Do(func() {
		s.runners = &runners{Store: s.Store, Log: s.log(), clock: s.clock(), lease: s.lease(),
			conns: map[string]map[*runnerConn]bool{}, procs: map[runnerproto.RunRef]*remoteProcess{}}
		s.metrics = newMetrics(s.Store, s.log(), s.runners)
		s.runners.metrics = s.metrics
		s.Store.Observe = func(verb string, took time.Duration) { s.metrics.store.Observe(took, verb) }
		s.engine = &engine.Engine{
			Store:        s.Store,
			Locks:        &engine.MemLocks{},
			Launcher:     s.runners,
			TimeoutGrace: s.lease(),
			// Runners come back within the lease with the runs they have.
			AdoptUntil: s.clock().Now().Add(s.lease()),
			StopGrace:  s.StopGrace,
			Clock:      s.Clock,
			Log:        s.log(),
			Settled: func(r *lifecycle.Record) {
				s.log().Debug("session settled", "session", r.ID, "state", r.State, "reason", r.EndReason)
				s.metrics.runsEnded.Inc(string(r.State), string(r.EndReason))
			},
		}
		s.runners.engine = s.engine
		s.resources = &resources{Store: s.Store, Log: s.log(), engine: s.engine, metrics: s.metrics}
		s.clients = &clients{Store: s.Store, Log: s.log(), engine: s.engine, version: s.Version}
		s.ops = &ops{Store: s.Store, metrics: s.metrics}
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

// MetricsHandler writes the metrics, to whoever may see them.
func (s *Server) MetricsHandler() http.Handler {
	s.init()
	return s.ops.metricsHandler()
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
	wg.Go(func() { s.runners.cutRevoked(ctx) })
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	capped := &limitListener{Listener: ln, total: maxConns, perAddr: s.MaxConnsPerAddr, opened: func(d int) { s.metrics.conns.Add(float64(d)) }}
	ln = capped
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
		ConnState: capped.connState, BaseContext: func(net.Listener) context.Context { return ctx }}
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
