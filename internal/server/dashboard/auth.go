package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// signInPages serve the setup of the first admin, signing in and signing
// out.
type signInPages struct {
	*site
	// SignInTTL and SignInFailed: the Dashboard's.
	SignInTTL    time.Duration
	SignInFailed func()
	limit        *signInLimit
}

func (d *signInPages) ttl() time.Duration {
	if d.SignInTTL > 0 {
		return d.SignInTTL
	}
	return DefaultSignInTTL
}

func (d *signInPages) setupPage(w http.ResponseWriter, r *http.Request) {
	if has, err := d.Store.HasUsers(r.Context()); err != nil || has {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	d.render(w, http.StatusOK, "setup.html", page{Title: "Create the first admin"})
}

// setup spends the setup token `serve` printed on the first admin, and
// signs them in.
func (d *signInPages) setup(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	name, password := r.PostFormValue("name"), r.PostFormValue("password")
	if err := d.limit.hash(r.Context(), func() error {
		_, err := d.Store.CreateFirstAdmin(r.Context(), r.PostFormValue("token"), name, password)
		return err
	}); err != nil {
		d.render(w, http.StatusBadRequest, "setup.html", page{Title: "Create the first admin", Error: err.Error()})
		return
	}
	d.log().Info("dashboard: first admin created", "user", name)
	d.signInAs(w, r, name, password)
}

func (d *signInPages) signInPage(w http.ResponseWriter, r *http.Request) {
	if has, err := d.Store.HasUsers(r.Context()); err == nil && !has {
		http.Redirect(w, r, "/setup", http.StatusSeeOther)
		return
	}
	p := page{Title: "Sign in", Data: localPath(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("expired") != "" {
		p.Error = "Your sign-in has expired or ended: sign in again."
	}
	d.render(w, http.StatusOK, "signin.html", p)
}

func (d *signInPages) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	d.signInAs(w, r, r.PostFormValue("name"), r.PostFormValue("password"))
}

// localPath is next when it is a path of this site (a page the person was
// sent to sign in from), else "": a sign-in never leads elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return ""
	}
	return next
}

// signInAs signs in as name, within the limits on guessing: a user or
// address with too many failures is refused before its password is
// checked, and each failure is logged with the address.
func (d *signInPages) signInAs(w http.ResponseWriter, r *http.Request, name, password string) {
	addr := address(r)
	next := localPath(r.PostFormValue("next"))
	if why, wait := d.limit.refused(name, addr); why != "" {
		d.log().Warn("dashboard: sign-in refused: too many failures", "user", name, "address", addr)
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		d.render(w, http.StatusTooManyRequests, "signin.html", page{Title: "Sign in", Error: why, Data: next})
		return
	}
	var tok string
	err := d.limit.hash(r.Context(), func() (err error) {
		tok, _, err = d.Store.SignIn(r.Context(), name, password, d.ttl())
		return err
	})
	if errors.Is(err, sqlstore.ErrBadSignIn) {
		d.log().Warn("dashboard: sign-in failed", "user", name, "address", addr)
		if d.SignInFailed != nil {
			d.SignInFailed()
		}
		for _, k := range d.limit.failed(name, addr) {
			d.log().Warn("dashboard: sign-in locked after too many failures", k.kind, k.value, "for", lockFor, "address", addr)
		}
		d.render(w, http.StatusUnauthorized, "signin.html", page{Title: "Sign in", Error: "Wrong user name or password.", Data: next})
		return
	}
	if errors.Is(err, errHashBusy) {
		w.Header().Set("Retry-After", "1")
		d.render(w, http.StatusServiceUnavailable, "signin.html", page{Title: "Sign in", Error: err.Error(), Data: next})
		return
	}
	if err != nil {
		d.log().Error("dashboard: signing in", "user", name, "err", err)
		d.render(w, http.StatusInternalServerError, "signin.html", page{Title: "Sign in", Error: err.Error(), Data: next})
		return
	}
	d.limit.succeeded(name, addr)
	d.setCookie(w, r, tok, int(d.ttl().Seconds()))
	if next == "" {
		next = "/sessions"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *signInPages) signOut(w http.ResponseWriter, r *http.Request, u user) {
	if err := d.Store.SignOut(r.Context(), u.token); err != nil {
		d.serverError(w, u, "signing out", err)
		return
	}
	d.setCookie(w, r, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
