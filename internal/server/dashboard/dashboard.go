// Package dashboard is the Blaise server's web page (`serve` at /):
// sign-in, agents and their settings, runners and their tokens, sessions
// and their actions. Pages are rendered on the server from embedded
// templates and forms post plainly; a session's page follows its
// transcript with one small script. No page requests anything beyond this
// server.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
)

//go:embed templates/*.html
var templates embed.FS

//go:embed assets
var assets embed.FS

// CookieName is the signed-in browser's cookie.
const CookieName = "blaise_session"

// DefaultSignInTTL is how long a sign-in lasts.
const DefaultSignInTTL = 12 * time.Hour

// maxForm bounds a form's body.
const maxForm = 64 << 10

// Sessions are the engine's actions on sessions, as the API takes them.
type Sessions interface {
	EndSession(ctx context.Context, id string) (*lifecycle.Record, error)
	ResolveSession(ctx context.Context, id string) (*lifecycle.Record, error)
}

// Actions are the actions sessions offer (docs/server.md#actions): which
// a session offers, and doing one on its runner, its output written to out
// as it comes.
type Actions interface {
	SessionActions(ctx context.Context, id string) ([]api.Action, error)
	Act(ctx context.Context, id, action string, args json.RawMessage, out io.Writer) error
}

// Dashboard is what the pages are served with; Handler gives each group
// of pages its part.
type Dashboard struct {
	Store    *sqlstore.Store
	Sessions Sessions
	Runners  Runners
	// Actions, when set, give a session's page its changes (changes.go).
	Actions Actions
	// Forks, when set, fork paused sessions (fork.go).
	Forks Forks
	// ACP connects the dashboard's client to an agent's front end.
	ACP ACP
	Log *log.Logger
	// SignInTTL: see DefaultSignInTTL; 0 means it.
	SignInTTL time.Duration
	// SignInFailed, when set, is told of each refused sign-in (the
	// server's metrics count them).
	SignInFailed func()
}

// Handler serves the dashboard. Every state-changing request must come
// from this site (Sec-Fetch-Site or Origin) and, once signed in, carry the
// form's token.
func (d *Dashboard) Handler() http.Handler {
	s := &site{Store: d.Store, Log: d.Log, pages: map[string]*template.Template{}}
	names, _ := fs.Glob(templates, "templates/*.html")
	for _, n := range names {
		if n != "templates/layout.html" {
			s.pages[n[len("templates/"):]] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templates, "templates/layout.html", n))
		}
	}
	in := &signInPages{site: s, SignInTTL: d.SignInTTL, SignInFailed: d.SignInFailed, limit: newSignInLimit()}
	agents := &agentPages{site: s}
	runners := &runnerPages{site: s, Runners: d.Runners}
	client := newACPClient(d.ACP, s.log())
	list := &sessionListPages{site: s, Sessions: d.Sessions, client: client}
	one := &sessionPages{site: s, client: client, Actions: d.Actions}
	changes := &changesPages{site: s, Actions: d.Actions}
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	// Browsers ask for /favicon.ico whatever a page links.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/sessions", http.StatusSeeOther) })
	mux.HandleFunc("GET /setup", in.setupPage)
	mux.HandleFunc("POST /setup", in.setup)
	mux.HandleFunc("GET /signin", in.signInPage)
	mux.HandleFunc("POST /signin", in.signIn)
	mux.HandleFunc("POST /signout", s.signedIn(in.signOut))
	mux.HandleFunc("GET /agents", s.signedIn(agents.agents))
	mux.HandleFunc("GET /agents/{name}", s.signedIn(agents.agent))
	mux.HandleFunc("POST /agents/{name}", s.signedIn(agents.saveAgent))
	mux.HandleFunc("GET /runners", s.signedIn(runners.runners))
	mux.HandleFunc("POST /runners/tokens", s.signedIn(runners.mintRegistration))
	mux.HandleFunc("POST /runners/{id}/revoke", s.signedIn(runners.revokeRunner))
	mux.HandleFunc("POST /tokens/{id}/revoke", s.signedIn(runners.revokeToken))
	mux.HandleFunc("GET /sessions", s.signedIn(list.sessions))
	mux.HandleFunc("GET /sessions/rows", s.signedIn(list.rows))
	mux.HandleFunc("GET /sessions/{id}", s.signedIn(one.sessionDetail))
	mux.HandleFunc("GET /sessions/{id}/events", s.signedIn(one.follow))
	mux.HandleFunc("GET /sessions/{id}/transcript", s.signedIn(one.transcript))
	mux.HandleFunc("GET /sessions/{id}/transcript.jsonl", s.signedIn(one.transcript))
	mux.HandleFunc("GET /sessions/{id}/plug-log", s.signedIn(one.plugLog))
	mux.HandleFunc("GET /sessions/{id}/changes", s.signedIn(changes.changes))
	mux.HandleFunc("POST /sessions/{id}/changes/{action}", s.signedIn(changes.act))
	mux.HandleFunc("POST /sessions/{id}/fork", s.signedIn((&forkPages{site: s, Forks: d.Forks}).forkSession))
	mux.HandleFunc("POST /sessions/{id}/end", s.signedIn(list.endSession))
	mux.HandleFunc("POST /sessions/{id}/resolve", s.signedIn(list.resolveSession))
	mux.HandleFunc("POST /sessions/{id}/prompt", s.signedIn(one.promptSession))
	mux.HandleFunc("POST /sessions/{id}/cancel", s.signedIn(one.cancelSession))
	mux.HandleFunc("POST /sessions/{id}/permissions/{req}", s.signedIn(one.answerPermission))
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log().Warn("dashboard: a form from another site refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "address", address(r))
		s.render(w, http.StatusForbidden, "error.html", page{Title: "Refused",
			Error: "This form was sent from another site (" + orNone(r.Header.Get("Origin")) + "), not from a page of this dashboard. Nothing was changed. If you meant it, open the dashboard and do it there."})
	}))
	return secureHeaders(cop.Handler(mux))
}

func orNone(s string) string {
	if s == "" {
		return "origin unknown"
	}
	return s
}

// secureHeaders keep the pages from being framed or loading anything from
// elsewhere, and a browser that came over TLS from coming back without it.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}
