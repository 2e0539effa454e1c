package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// A mint answers with a redirect to the page that shows the token, once:
// reloading that page mints nothing and shows it no more. The listen
// command names this server and the agent chosen.
func TestMintShowsTheTokenOnceAfterARedirect(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	csrf := s.signIn(c)
	resp, _ := s.do(c, http.MethodPost, "/runners/tokens", url.Values{"csrf": {csrf}, "ttl": {"24h0m0s"}, "agent": {"demo"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("minting: %s", resp.Status)
	}
	shown := resp.Header.Get("Location")
	resp, body := s.do(c, http.MethodGet, shown, nil)
	tok := regexp.MustCompile(`value="(blr_[^"]+)"`).FindStringSubmatch(body)
	if tok == nil {
		t.Fatalf("no token on the page:\n%s", body)
	}
	want(t, resp, body, http.StatusOK, "blaise-agent listen -c blaise.star --server "+s.srv.URL+" --agent demo --register-token "+tok[1],
		`data-copy="minted-command"`)
	resp, body = s.do(c, http.MethodGet, shown, nil)
	want(t, resp, body, http.StatusOK, "That registration token was shown once already")
	if strings.Contains(body, tok[1]) {
		t.Fatal("the reloaded page shows the token again")
	}
	if regs, _ := s.store.Registrations(t.Context()); len(regs) != 1 {
		t.Fatalf("%d registration tokens after a mint and two loads, want 1", len(regs))
	}
	resp, body = s.do(c, http.MethodPost, "/runners/tokens", url.Values{"csrf": {csrf}, "ttl": {"1h0m0s"}, "agent": {"nosuchagent"}})
	want(t, resp, body, http.StatusBadRequest, "No token minted: ")
}

// The runners page lists unused registration tokens and API tokens, and
// revokes them, after confirmation: a revoked registration token registers
// no runner, a revoked API token is refused.
func TestUnusedTokensAreListedAndRevoked(t *testing.T) {
	s := newSite(t, false)
	reg, err := s.store.MintRegistration(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	used, _ := s.store.MintRegistration(t.Context(), time.Hour)
	if _, _, err := s.store.Register(t.Context(), used.Token, "r1"); err != nil {
		t.Fatal(err)
	}
	api, apiID, err := s.store.MintAPIToken(t.Context(), "ci")
	if err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/runners", nil)
	want(t, resp, body, http.StatusOK, `id="t-`+reg.ID+`"`, `aria-label="Revoke registration token `+reg.ID+`"`, `aria-label="Revoke API token ci"`)
	if strings.Contains(body, `id="t-`+used.ID+`"`) {
		t.Fatal("a used registration token is listed as unused")
	}
	for id, question := range map[string]string{reg.ID: "Revoke registration token " + reg.ID + "?", apiID: "Revoke API token ci (" + apiID + ")?"} {
		resp, body := s.do(c, http.MethodPost, "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}})
		want(t, resp, body, http.StatusOK, question)
		resp, body = s.do(c, http.MethodPost, "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("revoking %s: %s\n%s", id, resp.Status, body)
		}
	}
	if _, _, err := s.store.Register(t.Context(), reg.Token, "r2"); err == nil {
		t.Fatal("a revoked registration token registered a runner")
	}
	if _, err := s.store.APIToken(t.Context(), api); err == nil {
		t.Fatal("a revoked API token is accepted")
	}
	resp, body = s.do(c, http.MethodPost, "/tokens/"+apiID+"/revoke", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusConflict, "Nothing was changed: API token ci ("+apiID+") was revoked already")
	resp, body = s.do(c, http.MethodPost, "/tokens/nosuchtoken/revoke", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusNotFound, "Nothing was revoked: no registration token and no API token has id nosuchtoken.")
}

// Failed sign-ins are logged with the address; after a few, even the
// right password waits, and says so (429).
func TestSignInFailuresAreLoggedAndLimited(t *testing.T) {
	s := newSite(t, false)
	for range 5 {
		resp, body := s.do(s.browser(), http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {"a wrong guess!"}})
		want(t, resp, body, http.StatusUnauthorized, "Wrong user name or password.")
	}
	if n := strings.Count(s.logs.String(), "dashboard: sign-in failed user=ada address=127.0.0.1"); n != 5 {
		t.Fatalf("%d failures logged, want 5:\n%s", n, s.logs)
	}
	resp, body := s.do(s.browser(), http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {password}})
	want(t, resp, body, http.StatusTooManyRequests, "Too many failed sign-ins for this user: try again after ")
	if len(resp.Cookies()) != 0 {
		t.Fatalf("a refused sign-in set %v", resp.Cookies())
	}
}

// Under TLS every page tells the browser to come back over TLS only (HSTS);
// a form from another site gets a dashboard page that says what happened.
func TestHSTSAndTheRefusedFormPage(t *testing.T) {
	s := newSite(t, true)
	c := s.browser()
	csrf := s.signIn(c)
	resp, _ := s.do(c, http.MethodGet, "/signin", nil)
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Fatalf("HSTS under TLS: %q", got)
	}
	resp, body := s.do(c, http.MethodPost, "/agents/demo", url.Values{"csrf": {csrf}, "idle_policy": {"end"}},
		"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	want(t, resp, body, http.StatusForbidden, "<title>Refused · Blaise</title>", "This form was sent from another site (https://evil.example)", "Nothing was changed.")
	plain := newSite(t, false)
	if resp, _ := plain.do(plain.browser(), http.MethodGet, "/signin", nil); resp.Header.Get("Strict-Transport-Security") != "" {
		t.Fatal("HSTS without TLS")
	}
}

// A server's session whose teardown failed says the server retries it
// (not `sessions sweep`, which does nothing for a server), and its error
// keeps its lines.
func TestServerSessionTeardownNoticeNamesTheServer(t *testing.T) {
	s := newSite(t, false)
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "t1", AgentName: "demo", State: lifecycle.TearingDown, Runner: "r1", Settings: lifecycle.DefaultSettings(),
		Teardown: lifecycle.TeardownRecord{Attempts: 1, LastError: "Traceback:\n  plug.star:3: in on_teardown\nError: device busy", NextAt: time.Now().Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/t1", nil)
	want(t, resp, body, http.StatusOK, "Traceback:\n  plug.star:3: in on_teardown\nError: device busy; the server retries it from ")
	if strings.Contains(body, "sessions sweep") {
		t.Fatalf("a server's session sends its user to sessions sweep:\n%s", body)
	}
}
