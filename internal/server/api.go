package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// MaxBody bounds a request's body.
const MaxBody = 1 << 20

// Handler is the server's HTTP API; ctx bounds its long connections.
func (s *Server) Handler(ctx context.Context) http.Handler {
	s.init()
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+runnerproto.PathRegister, s.runners.register)
	mux.HandleFunc("GET "+runnerproto.PathRunner, func(w http.ResponseWriter, r *http.Request) { s.runners.connect(ctx, w, r) })
	mux.HandleFunc("GET "+runstore.PathStore, s.runners.store)
	mux.HandleFunc("GET "+api.PathAgents, s.client(s.resources.listAgents))
	mux.HandleFunc("POST "+api.PathAgents, s.client(s.resources.createAgent))
	mux.HandleFunc("GET "+api.PathAgents+"/{name}", s.client(s.resources.getAgent))
	mux.HandleFunc("PATCH "+api.PathAgents+"/{name}", s.client(s.resources.updateAgent))
	mux.HandleFunc("DELETE "+api.PathAgents+"/{name}", s.client(s.resources.deleteAgent))
	mux.HandleFunc("GET "+api.PathAgents+"/{name}/acp", s.client(func(w http.ResponseWriter, r *http.Request) { s.clients.connect(ctx, w, r, s.KeepAlive) }))
	mux.HandleFunc("GET "+api.PathSessions, s.client(s.resources.listSessions))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}", s.client(s.resources.getSession))
	mux.HandleFunc("PATCH "+api.PathSessions+"/{id}", s.client(s.resources.patchSession))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}/transcript", s.client(s.resources.getTranscript))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}/plug-log", s.client(s.resources.getPlugLog))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/end", s.client(s.resources.endSession))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/resolve", s.client(s.resources.resolveSession))
	mux.HandleFunc("GET "+api.PathSessions+"/{id}/actions", s.client(s.runners.sessionActions))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/actions/{action}", s.client(s.resources.act))
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/fork", s.client(forks{s.runners, s.resources}.fork))
	dash := &dashboard.Dashboard{Store: s.Store, Sessions: s.resources, Runners: s.runners, Actions: dashboardActions{s.runners, s.resources}, Forks: forks{s.runners, s.resources}, Log: s.log(), SignInFailed: s.ops.signInFailed,
		ACP: func(agent string) (io.ReadWriteCloser, error) { return s.clients.open(ctx, agent) }}
	mux.Handle("/", dash.Handler())
	mux.HandleFunc("GET "+PathHealth, s.ops.health)
	mux.HandleFunc("GET "+PathReady, s.ops.ready)
	mux.Handle("GET "+PathMetrics, s.client(s.ops.metricsHandler().ServeHTTP))
	return s.ops.counted(mux)
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
	// Args, when an action's arguments are refused, name each one and
	// what was wanted.
	Args []api.ArgProblem `json:"args,omitempty"`
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
	case errors.Is(err, engine.ErrNoRun), errors.Is(err, lifecycle.ErrRunHeld), errors.As(err, new(*NoRunnerError)), errors.As(err, new(*OldRunnerError)):
		status = http.StatusConflict
	}
	var args *ArgsError
	if errors.As(err, &args) {
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error(), Args: args.problems()})
		return
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
