package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/metrics"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
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

// ops are the operators' endpoints: health, readiness and metrics, and
// the count of every answer.
type ops struct {
	Store   *sqlstore.Store
	metrics *serverMetrics
}

// serverMetrics are what /metrics shows (docs/server.md#metrics).
type serverMetrics struct {
	reg         metrics.Registry
	requests    metrics.Counter
	conns       metrics.Gauge
	runsStarted metrics.Counter
	runsEnded   metrics.Counter
	stops       metrics.Counter
	store       metrics.Histogram
	// signIns counts failed dashboard sign-ins (signInFailed).
	signIns metrics.Counter
}

// newMetrics are the metrics of a server on store, whose connected runners
// are rs's.
func newMetrics(store *sqlstore.Store, l *log.Logger, rs *runners) *serverMetrics {
	m := &serverMetrics{}
	r := &m.reg
	r.Collected("blaise_sessions", "Sessions by agent and state.", "gauge", func(add func(float64, ...string)) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		counts, err := store.CountSessions(ctx)
		if err != nil {
			l.Warn("metrics: counting sessions", "err", err)
		}
		for _, c := range counts {
			add(float64(c.N), c.Agent, c.State)
		}
	}, "agent", "state")
	m.runsStarted = r.Counter("blaise_runs_started_total", "Runs launched on a runner, by agent.", "agent")
	m.runsEnded = r.Counter("blaise_runs_ended_total", "Runs settled, by the state they left their session in and why it ended (empty while it may resume).", "state", "reason")
	m.stops = r.Counter("blaise_stops_total", "Stops asked of running sessions (ending one through the API or the dashboard), by outcome: sent or refused.", "outcome")
	for _, outcome := range []string{"sent", "refused"} {
		m.stops.Add(0, outcome) // both scraped from the start
	}
	r.Collected("blaise_runners_connected", "Runners connected, by agent.", "gauge", func(add func(float64, ...string)) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for agent, conns := range rs.conns {
			if len(conns) > 0 {
				add(float64(len(conns)), agent)
			}
		}
	}, "agent")
	m.store = r.Histogram("blaise_store_seconds", "Time of the store's statements, by verb.", metrics.DefaultBuckets, "verb")
	r.Collected("blaise_transcript_bytes_total", "Bytes of transcript lines stored since the server started.", "counter", func(add func(float64, ...string)) {
		add(float64(store.TranscriptBytes()))
	})
	m.requests = r.Counter("blaise_http_requests_total", "HTTP requests answered, by route and status code.", "route", "code")
	m.conns = r.Gauge("blaise_http_connections", "Connections open, WebSockets included.")
	m.signIns = r.Counter("blaise_signin_failures_total", "Dashboard sign-ins refused.")
	return m
}

// signInFailed counts a refused dashboard sign-in.
func (o *ops) signInFailed() {
	o.metrics.signIns.Inc()
}

// metricsHandler writes the metrics, to whoever may see them.
func (o *ops) metricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metrics.ContentType)
		_ = o.metrics.reg.Write(w)
	})
}

func (o *ops) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (o *ops) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := o.Store.Ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

// counted counts h's answers by route (the pattern that matched) and
// status.
func (o *ops) counted(h http.Handler) http.Handler {
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
		o.metrics.requests.Inc(route, strconv.Itoa(code))
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
