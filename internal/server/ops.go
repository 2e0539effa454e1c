package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/metrics"
	"github.com/coder/websocket"
)

// Paths every server answers without a token.
const (
	// PathHealth answers 200 while the server is up.
	PathHealth = "/healthz"
	// PathReady answers 200 when the database answers and has this
	// binary's schema, else 503 saying why.
	PathReady = "/readyz"
	// PathMetrics has the metrics, with an API token (or on
	// --metrics-addr without one).
	PathMetrics = "/metrics"
)

// serverMetrics are what /metrics shows (docs/server.md#metrics).
type serverMetrics struct {
	reg         metrics.Registry
	requests    metrics.Counter
	conns       metrics.Gauge
	runsStarted metrics.Counter
	runsEnded   metrics.Counter
	stops       metrics.Counter
	store       metrics.Histogram
	// signIns counts failed dashboard sign-ins (SignInFailed).
	signIns metrics.Counter
}

func (s *Server) newMetrics() *serverMetrics {
	m := &serverMetrics{}
	r := &m.reg
	r.Collected("blaise_sessions", "Sessions by agent and state.", "gauge", func(add func(float64, ...string)) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		counts, err := s.Store.CountSessions(ctx)
		if err != nil {
			s.log().Warn("metrics: counting sessions", "err", err)
		}
		for _, c := range counts {
			add(float64(c.N), c.Agent, c.State)
		}
	}, "agent", "state")
	m.runsStarted = r.Counter("blaise_runs_started_total", "Runs launched on a runner, by agent.", "agent")
	m.runsEnded = r.Counter("blaise_runs_ended_total", "Runs settled, by the state they left their session in and why it ended (empty while it may resume).", "state", "reason")
	m.stops = r.Counter("blaise_stops_total", "Stops asked of running sessions (ending one through the API or the dashboard), by outcome: sent or refused.", "outcome")
	r.Collected("blaise_runners_connected", "Runners connected, by agent.", "gauge", func(add func(float64, ...string)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for agent, rs := range s.runners {
			if len(rs) > 0 {
				add(float64(len(rs)), agent)
			}
		}
	}, "agent")
	m.store = r.Histogram("blaise_store_seconds", "Time of the store's statements, by verb.", metrics.DefaultBuckets, "verb")
	r.Collected("blaise_transcript_bytes_total", "Bytes of transcript lines stored since the server started.", "counter", func(add func(float64, ...string)) {
		add(float64(s.Store.TranscriptBytes()))
	})
	m.requests = r.Counter("blaise_http_requests_total", "HTTP requests answered, by route and status code.", "route", "code")
	m.conns = r.Gauge("blaise_http_connections", "Connections open, WebSockets included.")
	m.signIns = r.Counter("blaise_signin_failures_total", "Dashboard sign-ins refused.")
	return m
}

// SignInFailed counts a refused dashboard sign-in.
func (s *Server) SignInFailed() {
	s.init()
	s.metrics.signIns.Inc()
}

// runSettled counts the end of a run.
func (s *Server) runSettled(r *lifecycle.Record) {
	s.metrics.runsEnded.Inc(string(r.State), string(r.EndReason))
}

// MetricsHandler writes the metrics, to whoever may see them.
func (s *Server) MetricsHandler() http.Handler {
	s.init()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metrics.ContentType)
		_ = s.metrics.reg.Write(w)
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.Store.Ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

// counted counts h's answers by route (the pattern that matched) and
// status.
func (s *Server) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		code := sw.code
		switch {
		case sw.hijacked:
			code = http.StatusSwitchingProtocols
		case code == 0:
			code = http.StatusOK
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.metrics.requests.Inc(route, strconv.Itoa(code))
	})
}

// statusWriter remembers the status written; http.ResponseController
// and websocket.Accept reach the writer under it.
type statusWriter struct {
	http.ResponseWriter
	code     int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// keepAlive pings a client's WebSocket until it closes; a peer that does
// not answer within the interval is cut.
func (s *Server) keepAlive(ctx context.Context, ws *websocket.Conn) {
	every := s.KeepAlive
	if every <= 0 {
		every = DefaultKeepAlive
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := ws.Ping(pctx)
		cancel()
		if err != nil {
			ws.CloseNow()
			return
		}
	}
}
