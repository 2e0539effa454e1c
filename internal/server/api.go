package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
)

// MaxBody bounds a request's body.
const MaxBody = 1 << 20

// Handler is the server's HTTP API; ctx bounds its long connections.
func (s *Server) Handler(ctx context.Context) http.Handler {
	s.init()
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+runnerproto.PathRegister, s.register)
	mux.HandleFunc("GET "+runnerproto.PathRunner, func(w http.ResponseWriter, r *http.Request) { s.connectRunner(ctx, w, r) })
	mux.HandleFunc("GET "+api.PathAgents, s.client(s.listAgents))
	mux.HandleFunc("POST "+api.PathAgents, s.client(s.createAgent))
	mux.HandleFunc("GET "+api.PathAgents+"/{name}", s.client(s.getAgent))
	mux.HandleFunc("PATCH "+api.PathAgents+"/{name}", s.client(s.updateAgent))
	mux.HandleFunc("DELETE "+api.PathAgents+"/{name}", s.client(s.deleteAgent))
	mux.HandleFunc("GET "+api.PathAgents+"/{name}/acp", s.client(func(w http.ResponseWriter, r *http.Request) { s.connectClient(ctx, w, r) }))
	mux.HandleFunc("GET "+api.PathSessions, s.client(s.listSessions))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}", s.client(s.getSession))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}/transcript", s.client(s.getTranscript))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}/plug-log", s.client(s.getPlugLog))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/end", s.client(s.endSession))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/resolve", s.client(s.resolveSession))
	dash := &dashboard.Dashboard{Store: s.Store, Sessions: s, Runners: s, Log: s.log(), SignInFailed: s.SignInFailed,
		ACP: func(agent string) (io.ReadWriteCloser, error) { return s.openACP(ctx, agent) }}
	mux.Handle("/", dash.Handler())
	mux.HandleFunc("GET "+PathHealth, s.health)
	mux.HandleFunc("GET "+PathReady, s.ready)
	mux.Handle("GET "+PathMetrics, s.client(s.MetricsHandler().ServeHTTP))
	return s.counted(mux)
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...)})
}

// failErr answers err with the status it calls for.
func failErr(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, lifecycle.ErrNotFound), errors.Is(err, sqlstore.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, engine.ErrNoRun), errors.Is(err, lifecycle.ErrRunHeld), errors.As(err, new(*NoRunnerError)):
		status = http.StatusConflict
	}
	fail(w, status, "%v", err)
}

// readJSON decodes a body of at most MaxBody bytes with no unknown fields.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "the body is larger than %d bytes", MaxBody)
		} else {
			fail(w, http.StatusBadRequest, "a bad body: %v", err)
		}
		return false
	}
	return true
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(tok)
}

// client lets through requests with a valid API token.
func (s *Server) client(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		if tok == "" {
			fail(w, http.StatusUnauthorized, "no API token (send Authorization: Bearer bla_…)")
			return
		}
		t, err := s.Store.APIToken(r.Context(), tok)
		if err != nil {
			fail(w, http.StatusUnauthorized, "%v", err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, t.Name)))
	}
}

type ownerKey struct{}

// owner is the name of the API token of a client's request: the owner of
// the sessions it opens.
func owner(r *http.Request) string {
	name, _ := r.Context().Value(ownerKey{}).(string)
	return name
}

// register exchanges a registration token for a runner credential.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
		Name  string `json:"name"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	cred, id, err := s.Store.Register(r.Context(), req.Token, req.Name)
	if errors.Is(err, sqlstore.ErrBadToken) {
		fail(w, http.StatusUnauthorized, "%v", err)
		return
	}
	if err != nil {
		failErr(w, err)
		return
	}
	s.log().Info("runner registered", "runner", req.Name, "id", id)
	writeJSON(w, http.StatusOK, map[string]string{"credential": cred, "runner_id": id})
}

// connectRunner takes a runner's connection: WebSocket, then yamux.
func (s *Server) connectRunner(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	runner, err := s.Store.RunnerByCredential(ctx, bearer(r))
	if err != nil {
		fail(w, http.StatusUnauthorized, "%v", err)
		return
	}
	agent := r.URL.Query().Get("agent")
	a, err := s.Store.Agent(ctx, agent)
	if err != nil {
		failErr(w, err)
		return
	}
	version := servedVersion(r)
	if version == 0 {
		offered := strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ", ")
		if offered == "" {
			offered = "none"
		}
		var served []string
		for _, v := range runnerproto.Served {
			served = append(served, runnerproto.Subprotocol(v))
		}
		fail(w, http.StatusBadRequest, "wrong protocol version: this server speaks %s, the runner offered %s: run a blaise-agent of the server's version on the runner", strings.Join(served, " or "), offered)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{runnerproto.Subprotocol(version)}})
	if err != nil {
		return
	}
	ws.SetReadLimit(-1)
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	mux, err := yamux.Server(runnerproto.Coalesce(nc, nil), runnerproto.YamuxConfig())
	if err != nil {
		nc.Close()
		return
	}
	first, err := mux.AcceptStream()
	if err != nil {
		mux.Close()
		return
	}
	frames := runnerproto.NewConn(first)
	hello, err := frames.Receive()
	if err != nil || hello.Kind != runnerproto.KindHello {
		refuse(mux, first, "the first frame must be hello")
		return
	}
	if hello.Version != version {
		refuse(mux, first, fmt.Sprintf("runner protocol version %d; this connection speaks %d", hello.Version, version))
		return
	}
	rc := &runnerConn{s: s, agent: a.Name, name: runner.Name, id: runner.ID, build: hello.Build, config: hello.Config, dir: hello.Dir, version: version, mux: mux, frames: frames, gone: make(chan struct{}), welcomed: make(chan struct{}), procs: map[runnerproto.RunRef]*remoteProcess{}}
	// The runs the runner still has, the server takes back, those of its
	// connection that broke and those it had before it restarted; the
	// runner stops the others.
	var kept []runnerproto.RunRef
	seen := map[runnerproto.RunRef]bool{}
	for _, ref := range hello.Runs {
		if seen[ref] { // a run named twice is taken back once
			continue
		}
		seen[ref] = true
		if rc.reattach(ref) || rc.takeBack(ctx, ref) {
			kept = append(kept, ref)
		}
	}
	// Runs may go to the runner once it knows it is welcome: it is one of
	// the agent's before, so that a session started when it says it is
	// connected finds it; a launch waits for the welcome (launch).
	s.addRunner(rc)
	welcome := runnerproto.Frame{Kind: runnerproto.KindWelcome, Settings: &a.Settings, Runs: kept, LeaseMS: s.lease().Milliseconds()}
	if err := frames.Send(welcome); err != nil {
		s.removeRunner(rc)
		mux.Close()
		close(rc.gone)
		return
	}
	close(rc.welcomed)
	s.log().Info("runner connected", "agent", a.Name, "runner", runner.Name)
	s.engine.Wake() // teardowns that waited for a runner
	rc.serve(ctx)
}

// refuse answers a runner's hello with why it is refused, and closes the
// connection once the runner has read it (it closes its side), or after a
// moment: yamux does not send what is queued when its session closes.
func refuse(mux *yamux.Session, first *yamux.Stream, why string) {
	defer mux.Close()
	if err := runnerproto.NewConn(first).Send(runnerproto.Frame{Kind: runnerproto.KindWelcome, Error: why}); err != nil {
		return
	}
	first.Close()
	_ = first.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.Copy(io.Discard, first)
}

func offers(r *http.Request, proto string) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if strings.TrimSpace(p) == proto {
				return true
			}
		}
	}
	return false
}

// servedVersion is the newest runner protocol version that both the
// server serves and the runner offers; 0 for none.
func servedVersion(r *http.Request) int {
	for _, v := range runnerproto.Served {
		if offers(r, runnerproto.Subprotocol(v)) {
			return v
		}
	}
	return 0
}

// connectClient serves ACP to a client of an agent: the same front end as
// `blaise-agent acp`, over a WebSocket.
func (s *Server) connectClient(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	a, err := s.Store.Agent(ctx, r.PathValue("name"))
	if err != nil {
		failErr(w, err)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{api.ACPSubprotocol}})
	if err != nil {
		return
	}
	ws.SetReadLimit(-1)
	nc := runnerproto.Coalesce(websocket.NetConn(ctx, ws, websocket.MessageBinary), nil)
	defer nc.Close()
	kctx, stop := context.WithCancel(ctx)
	var kept sync.WaitGroup
	defer kept.Wait()
	defer stop()
	kept.Go(func() { s.keepAlive(kctx, ws) })
	if err := s.serveACP(ctx, a, owner(r), nc, nc); err != nil {
		s.log().Debug("a client's connection ended", "agent", a.Name, "err", err)
	}
}
