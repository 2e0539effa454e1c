package dashboard

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
)

// site is what every page shares: the store, the log, the templates, the
// sign-in cookie and the check of it, and the pages that say an error or
// ask for a confirmation.
type site struct {
	Store *sqlstore.Store
	Log   *log.Logger
	pages map[string]*template.Template // by template file name
}

func (d *site) log() *log.Logger {
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

func (d *site) render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := d.pages[name].Execute(w, p); err != nil {
		d.log().Error("dashboard: rendering a page", "page", name, "err", err)
	}
}

// part renders the template part of the page name alone, with the
// version of what it rendered: a digest of it.
func (d *site) part(name, part string, p page) (template.HTML, string, error) {
	var b bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&b, part, p); err != nil {
		return "", "", fmt.Errorf("rendering %s of %s: %w", part, name, err)
	}
	sum := sha256.Sum256(b.Bytes())
	return template.HTML(b.String()), base64.RawURLEncoding.EncodeToString(sum[:16]), nil
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
func (d *site) signedIn(h func(http.ResponseWriter, *http.Request, user)) http.HandlerFunc {
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
				// Signed in, the person lands on the page they asked for.
				q := url.Values{"next": {r.URL.RequestURI()}}
				if c != nil {
					q.Set("expired", "1")
				}
				http.Redirect(w, r, "/signin?"+q.Encode(), http.StatusSeeOther)
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

func (d *site) pageFor(u user, title string) page {
	return page{Title: title, User: u.User, CSRF: csrfToken(u.token)}
}

// serverError logs err and tells the person what failed.
func (d *site) serverError(w http.ResponseWriter, u user, what string, err error) {
	d.log().Error("dashboard: "+what, "err", err)
	p := d.pageFor(u, "Error")
	p.Error = what + ": " + err.Error()
	status := http.StatusInternalServerError
	if errors.Is(err, lifecycle.ErrNotFound) || errors.Is(err, sqlstore.ErrNotFound) {
		status = http.StatusNotFound
	}
	d.render(w, status, "error.html", p)
}

// setCookie sets the sign-in cookie: HttpOnly, SameSite=Lax, Secure when
// the request came over TLS.
func (d *site) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
}
