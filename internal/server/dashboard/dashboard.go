// Package dashboard is the Blaise server's web page (`serve` at /):
// sign-in, agents and their settings, runners and their tokens, sessions
// and their actions. Pages are rendered on the server from embedded
// templates and forms post plainly; a session's page follows its
// transcript with one small script. No page requests anything beyond this
// server.
package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
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

// Dashboard serves the pages.
type Dashboard struct {
	Store    *sqlstore.Store
	Sessions Sessions
	Runners  Runners
	// ACP connects the dashboard's client to an agent's front end.
	ACP ACP
	Log *log.Logger
	// SignInTTL: see DefaultSignInTTL; 0 means it.
	SignInTTL time.Duration
	// SignInFailed, when set, is told of each refused sign-in (the
	// server's metrics count them).
	SignInFailed func()

	pages  map[string]*template.Template
	client *acpClient
	mints  mints
	limit  *signInLimit
}

// Handler serves the dashboard. Every state-changing request must come
// from this site (Sec-Fetch-Site or Origin) and, once signed in, carry the
// form's token.
func (d *Dashboard) Handler() http.Handler {
	d.pages = map[string]*template.Template{}
	d.client = newACPClient(d.ACP, d.log())
	d.limit = newSignInLimit()
	names, _ := fs.Glob(templates, "templates/*.html")
	for _, n := range names {
		if n != "templates/layout.html" {
			d.pages[n[len("templates/"):]] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templates, "templates/layout.html", n))
		}
	}
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	// Browsers ask for /favicon.ico whatever a page links.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/sessions", http.StatusSeeOther) })
	mux.HandleFunc("GET /setup", d.setupPage)
	mux.HandleFunc("POST /setup", d.setup)
	mux.HandleFunc("GET /signin", d.signInPage)
	mux.HandleFunc("POST /signin", d.signIn)
	mux.HandleFunc("POST /signout", d.signedIn(d.signOut))
	mux.HandleFunc("GET /agents", d.signedIn(d.agents))
	mux.HandleFunc("GET /agents/{name}", d.signedIn(d.agent))
	mux.HandleFunc("POST /agents/{name}", d.signedIn(d.saveAgent))
	mux.HandleFunc("GET /runners", d.signedIn(d.runners))
	mux.HandleFunc("POST /runners/tokens", d.signedIn(d.mintRegistration))
	mux.HandleFunc("POST /runners/{id}/revoke", d.signedIn(d.revokeRunner))
	mux.HandleFunc("POST /tokens/{id}/revoke", d.signedIn(d.revokeToken))
	mux.HandleFunc("GET /sessions", d.signedIn(d.sessions))
	mux.HandleFunc("GET /sessions/{id}", d.signedIn(d.sessionDetail))
	mux.HandleFunc("GET /sessions/{id}/events", d.signedIn(d.follow))
	mux.HandleFunc("GET /sessions/{id}/transcript", d.signedIn(d.transcript))
	mux.HandleFunc("GET /sessions/{id}/transcript.jsonl", d.signedIn(d.transcript))
	mux.HandleFunc("POST /sessions/{id}/end", d.signedIn(d.endSession))
	mux.HandleFunc("POST /sessions/{id}/resolve", d.signedIn(d.resolveSession))
	mux.HandleFunc("POST /sessions/{id}/prompt", d.signedIn(d.promptSession))
	mux.HandleFunc("POST /sessions/{id}/cancel", d.signedIn(d.cancelSession))
	mux.HandleFunc("POST /sessions/{id}/permissions/{req}", d.signedIn(d.answerPermission))
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.log().Warn("dashboard: a form from another site refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "address", address(r))
		d.render(w, http.StatusForbidden, "error.html", page{Title: "Refused",
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

func (d *Dashboard) log() *log.Logger {
	if d.Log == nil {
		return log.Default()
	}
	return d.Log
}

// page is what every template gets.
type page struct {
	Title  string
	User   *sqlstore.User
	CSRF   string
	Error  string
	Notice string
	Data   any
}

func (d *Dashboard) render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := d.pages[name].Execute(w, p); err != nil {
		d.log().Error("dashboard: rendering a page", "page", name, "err", err)
	}
}

// csrfToken is the form token of a signed-in browser: derived from its
// cookie, which a page of another site cannot read.
func csrfToken(cookie string) string {
	h := sha256.Sum256([]byte("blaise-dashboard-form\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// user is who a request signs in as, with its cookie's token.
type user struct {
	*sqlstore.User
	token string
}

// signedIn lets through requests of a signed-in browser; a POST must carry
// the form token too. Others are sent to sign in (a GET) or refused.
func (d *Dashboard) signedIn(h func(http.ResponseWriter, *http.Request, user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(CookieName)
		var u *sqlstore.User
		if err == nil {
			u, err = d.Store.WebSession(r.Context(), c.Value)
		}
		if err != nil {
			why := "Sign in to see this page."
			if c != nil {
				why = "Your sign-in has expired or ended: sign in again."
			}
			if r.Method == http.MethodGet {
				to := "/signin"
				if c != nil {
					to += "?expired=1"
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			d.render(w, http.StatusUnauthorized, "signin.html", page{Title: "Sign in", Error: why + " Nothing was changed."})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(c.Value))) != 1 {
				d.render(w, http.StatusForbidden, "error.html", page{Title: "Refused", User: u, CSRF: csrfToken(c.Value),
					Error: "This form was not sent by a page of this dashboard (its form token is missing or wrong). Nothing was changed; reload the page and try again."})
				return
			}
		}
		h(w, r, user{u, c.Value})
	}
}

func (d *Dashboard) pageFor(u user, title string) page {
	return page{Title: title, User: u.User, CSRF: csrfToken(u.token)}
}

// serverError logs err and tells the person what failed.
func (d *Dashboard) serverError(w http.ResponseWriter, u user, what string, err error) {
	d.log().Error("dashboard: "+what, "err", err)
	p := d.pageFor(u, "Error")
	p.Error = what + ": " + err.Error()
	status := http.StatusInternalServerError
	if errors.Is(err, lifecycle.ErrNotFound) || errors.Is(err, sqlstore.ErrNotFound) {
		status = http.StatusNotFound
	}
	d.render(w, status, "error.html", p)
}
