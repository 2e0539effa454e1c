package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
)

const password = "correct horse battery"

// site is a real server (SQLite store, the API and the dashboard) behind
// an HTTP listener, with an agent "demo" and an admin "ada".
type site struct {
	t     testing.TB
	store *sqlstore.Store
	srv   *httptest.Server
	logs  *syncBuffer // what the server logged
	data  string      // the store's directory
}

// syncBuffer is a log's output, read while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newSite(t testing.TB, tls bool) *site {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	data := t.TempDir()
	store, err := server.StoreOptions{Data: data}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logs := &syncBuffer{}
	h := (&server.Server{Store: store, Log: log.New(logs)}).Handler(ctx)
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	if _, err := store.CreateAgent(ctx, sqlstore.Agent{Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	tok, err := store.MintSetupToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateFirstAdmin(ctx, tok, "ada", password); err != nil {
		t.Fatal(err)
	}
	return &site{t: t, store: store, srv: srv, logs: logs, data: data}
}

// browser is a client with a cookie jar that does not follow redirects.
func (s *site) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := s.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func (s *site) do(c *http.Client, method, path string, form url.Values, header ...string) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn signs c in and returns the form token of its pages.
func (s *site) signIn(c *http.Client) string {
	s.t.Helper()
	resp, _ := s.do(c, http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("sign-in: %s", resp.Status)
	}
	_, body := s.do(c, http.MethodGet, "/agents/demo", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no form token in the settings page:\n%s", body)
	}
	return m[1]
}

func (s *site) lifetime() time.Duration {
	s.t.Helper()
	a, err := s.store.Agent(s.t.Context(), "demo")
	if err != nil {
		s.t.Fatal(err)
	}
	return a.Settings.PausedLifetime
}

func want(t testing.TB, resp *http.Response, body string, status int, parts ...string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %s, want %d; body:\n%s", resp.Status, status, body)
	}
	for _, p := range parts {
		if !strings.Contains(body, p) {
			t.Fatalf("the page lacks %q:\n%s", p, body)
		}
	}
}

// TestSignedOutRequestIsRefused: a signed-out browser sees no page and
// changes nothing; a signed-out or expired cookie is no better than none.
func TestSignedOutRequestIsRefused(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	resp, _ := s.do(c, http.MethodGet, "/sessions", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2Fsessions" {
		t.Fatalf("a signed-out GET: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := s.do(c, http.MethodPost, "/agents/demo", url.Values{"idle_policy": {"end"}, "paused_lifetime": {"1h"}})
	want(t, resp, body, http.StatusUnauthorized, "Sign in to see this page", "Nothing was changed")

	csrf := s.signIn(c)
	resp, _ = s.do(c, http.MethodPost, "/signout", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %s", resp.Status)
	}
	// The old cookie, sent again as a copied one would be.
	u, _ := url.Parse(s.srv.URL)
	old := c.Jar.Cookies(u)
	if len(old) != 0 {
		t.Fatalf("the cookie outlived the sign-out: %v", old)
	}
	resp, body = s.do(c, http.MethodPost, "/agents/demo", url.Values{"csrf": {csrf}, "idle_policy": {"end"}, "paused_lifetime": {"1h"}})
	want(t, resp, body, http.StatusUnauthorized)
	if got := s.lifetime(); got != 24*time.Hour {
		t.Fatalf("paused lifetime %s after refused posts, want 24h", got)
	}
}

// TestCSRFLessPostIsRefused: every form needs this page's token and this
// site's origin; without either, nothing changes.
func TestCSRFLessPostIsRefused(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	csrf := s.signIn(c)
	form := url.Values{"idle_policy": {"end"}, "paused_lifetime": {"1h"}}
	resp, body := s.do(c, http.MethodPost, "/agents/demo", form)
	want(t, resp, body, http.StatusForbidden, "form token is missing or wrong", "Nothing was changed")
	form.Set("csrf", csrf)
	resp, body = s.do(c, http.MethodPost, "/agents/demo", form, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	want(t, resp, body, http.StatusForbidden)
	if got := s.lifetime(); got != 24*time.Hour {
		t.Fatalf("paused lifetime %s after refused posts, want 24h", got)
	}
	resp, _ = s.do(c, http.MethodPost, "/agents/demo", form)
	if resp.StatusCode != http.StatusSeeOther || s.lifetime() != time.Hour {
		t.Fatalf("a good post: %s, lifetime %s", resp.Status, s.lifetime())
	}
}

// TestPausedLifetimeOutOfRangeChangesNothing: a paused lifetime outside 1
// hour to 7 days, or above the operator's maximum, gets a clear message and
// changes nothing.
func TestPausedLifetimeOutOfRangeChangesNothing(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	csrf := s.signIn(c)
	for _, bad := range []string{"192h", "30m", "soon"} {
		resp, body := s.do(c, http.MethodPost, "/agents/demo", url.Values{"csrf": {csrf}, "idle_policy": {"pause"}, "paused_lifetime": {bad}})
		want(t, resp, body, http.StatusBadRequest, "Not saved: paused lifetime &#34;"+bad+"&#34;: choose one of 1 hour,", "7 days (the operator&#39;s maximum is 7 days)")
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "172800000") // 2 days
	resp, body := s.do(c, http.MethodPost, "/agents/demo", url.Values{"csrf": {csrf}, "idle_policy": {"pause"}, "paused_lifetime": {"72h"}})
	want(t, resp, body, http.StatusBadRequest, "2 days (the operator&#39;s maximum is 2 days)")
	if strings.Contains(body, `value="72h0m0s"`) {
		t.Fatalf("the page offers more than the operator's maximum:\n%s", body)
	}
	resp, body = s.do(c, http.MethodPost, "/agents/demo", url.Values{"csrf": {csrf}, "idle_policy": {"never"}, "paused_lifetime": {"1h"}})
	want(t, resp, body, http.StatusBadRequest, "idle policy &#34;never&#34;: choose pause or end")
	if got := s.lifetime(); got != 24*time.Hour {
		t.Fatalf("paused lifetime %s after bad input, want 24h", got)
	}
}

// TestSignInCookieFlags: the sign-in cookie is HttpOnly and SameSite=Lax,
// and Secure under TLS.
func TestSignInCookieFlags(t *testing.T) {
	for _, tls := range []bool{false, true} {
		s := newSite(t, tls)
		resp, _ := s.do(s.browser(), http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {password}})
		cs := resp.Cookies()
		if len(cs) != 1 || cs[0].Name != dashboard.CookieName || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteLaxMode || cs[0].Secure != tls {
			t.Fatalf("TLS %v: cookies %+v", tls, cs)
		}
	}
}

// TestSetupTokenCreatesTheFirstAdminOnce: the setup token creates the first
// admin, once; then the setup page is gone and a wrong password is refused.
func TestSetupTokenCreatesTheFirstAdminOnce(t *testing.T) {
	ctx := t.Context()
	data := t.TempDir()
	store, err := server.StoreOptions{Data: data}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := httptest.NewServer((&server.Server{Store: store}).Handler(ctx))
	defer srv.Close()
	s := &site{t: t, store: store, srv: srv}
	c := s.browser()
	resp, _ := s.do(c, http.MethodGet, "/signin", nil)
	if resp.Header.Get("Location") != "/setup" {
		t.Fatalf("sign-in with no user: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	tok, err := store.MintSetupToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := s.do(c, http.MethodPost, "/setup", url.Values{"token": {tok}, "name": {"ada"}, "password": {"short"}})
	want(t, resp, body, http.StatusBadRequest, "the password has 5 characters; want at least 12")
	resp, body = s.do(c, http.MethodPost, "/setup", url.Values{"token": {tok}, "name": {"ada"}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup: %s\n%s", resp.Status, body)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK, "Sign out")
	resp, body = s.do(s.browser(), http.MethodPost, "/setup", url.Values{"token": {tok}, "name": {"eve"}, "password": {password}})
	want(t, resp, body, http.StatusBadRequest, "already used")
	resp, body = s.do(s.browser(), http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {"not the password"}})
	want(t, resp, body, http.StatusUnauthorized, "Wrong user name or password.")
}

// TestResolveAnOrphanedSessionFromThePage: an orphaned session says what its
// teardown left behind and is resolved from the page; resolving any other
// session, or ending an unknown one, says why and changes nothing.
func TestResolveAnOrphanedSessionFromThePage(t *testing.T) {
	s := newSite(t, false)
	for _, rec := range []*lifecycle.Record{
		{ID: "orphan1", AgentName: "demo", State: lifecycle.Orphaned, Settings: lifecycle.DefaultSettings(),
			Teardown: lifecycle.TeardownRecord{Attempts: 3, LastError: "worktree /w/x: device busy"}, OrphanedState: []string{"gone-plug"}},
		{ID: "live1", AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions?state=orphaned", nil)
	want(t, resp, body, http.StatusOK, "teardown failed 3 times: worktree /w/x: device busy", "<code>gone-plug</code>", `action="/sessions/orphan1/resolve"`)
	if strings.Contains(body, "live1") {
		t.Fatalf("the orphaned filter shows an active session:\n%s", body)
	}

	resp, body = s.do(c, http.MethodPost, "/sessions/live1/resolve", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusConflict, "Nothing was changed: session live1 is active; only an orphaned session can be resolved")
	resp, body = s.do(c, http.MethodPost, "/sessions/"+lifecycle.NewID()+"/end", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusNotFound, "does not exist: nothing was changed")

	resp, _ = s.do(c, http.MethodPost, "/sessions/orphan1/resolve", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %s", resp.Status)
	}
	resp, body = s.do(c, http.MethodGet, resp.Header.Get("Location"), nil)
	want(t, resp, body, http.StatusOK, "Session orphan1 resolved: it is ended.")
	for id, st := range map[string]lifecycle.State{"orphan1": lifecycle.Ended, "live1": lifecycle.Active} {
		if rec, err := s.store.Session(t.Context(), id); err != nil || rec.State != st {
			t.Fatalf("session %s: %v, %v; want %s", id, rec, err, st)
		}
	}
}

// TestSigningInLeadsToThePageAskedFor: a signed-out browser sent to sign
// in from a session's page (a link in a chat, say) lands on that page once
// signed in; a next that is not a page of the site leads to the list.
func TestSigningInLeadsToThePageAskedFor(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	resp, _ := s.do(c, http.MethodGet, "/sessions/abc?tab=changes", nil)
	signin := resp.Header.Get("Location")
	if signin != "/signin?next=%2Fsessions%2Fabc%3Ftab%3Dchanges" {
		t.Fatalf("a signed-out GET of a session's page: to %q", signin)
	}
	resp, body := s.do(c, http.MethodGet, signin, nil)
	want(t, resp, body, http.StatusOK, `<input type="hidden" name="next" value="/sessions/abc?tab=changes">`)
	for next, to := range map[string]string{"/sessions/abc?tab=changes": "/sessions/abc?tab=changes", "//evil.example/x": "/sessions", "https://evil.example/": "/sessions"} {
		resp, _ := s.do(s.browser(), http.MethodPost, "/signin", url.Values{"name": {"ada"}, "password": {password}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != to {
			t.Errorf("signed in with next %q: %s to %q, want %q", next, resp.Status, resp.Header.Get("Location"), to)
		}
	}
}

// TestExpiredSignInIsToldSo: an expired sign-in is sent to sign in again,
// and told why; what it posts changes nothing.
func TestExpiredSignInIsToldSo(t *testing.T) {
	s := newSite(t, false)
	tok, _, err := s.store.SignIn(t.Context(), "ada", password, -time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := s.do(s.browser(), http.MethodGet, "/agents", nil, "Cookie", dashboard.CookieName+"="+tok)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?expired=1&next=%2Fagents" {
		t.Fatalf("an expired sign-in: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := s.do(s.browser(), http.MethodGet, resp.Header.Get("Location"), nil)
	want(t, resp, body, http.StatusOK, "Your sign-in has expired or ended: sign in again.")
	// A form posted with it changes nothing, and says why.
	resp, body = s.do(s.browser(), http.MethodPost, "/agents/demo", url.Values{"csrf": {"any"}, "idle_policy": {"end"}, "paused_lifetime": {"1h0m0s"}},
		"Cookie", dashboard.CookieName+"="+tok)
	want(t, resp, body, http.StatusUnauthorized, "Your sign-in has expired or ended: sign in again. Nothing was changed.")
	if got := s.lifetime(); got != 24*time.Hour {
		t.Fatalf("paused lifetime %s after a post of an expired sign-in, want 24h", got)
	}
}

// TestMintAndRevokeOnTheRunnersPage: a registration token minted on the
// runners page is shown once and registers a runner; a runner revoked there
// cannot connect; a bad lifetime, an unknown runner or one revoked already
// says why and changes nothing.
func TestMintAndRevokeOnTheRunnersPage(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/runners/tokens", url.Values{"csrf": {csrf}, "ttl": {"720h"}})
	want(t, resp, body, http.StatusBadRequest, "No token minted: lifetime 720h is not one of 1 hour, 1 day or 7 days.")
	if regs, _ := s.store.Registrations(t.Context()); len(regs) != 0 {
		t.Fatalf("a refused mint stored %d tokens", len(regs))
	}
	m := s.mint(c, csrf, "1h0m0s")
	if _, body = s.do(c, http.MethodGet, "/runners", nil); strings.Contains(body, m) {
		t.Fatal("the token is shown again")
	}
	cred, id, err := s.store.Register(t.Context(), m, "r1")
	if err != nil {
		t.Fatal(err)
	}
	resp, body = s.do(c, http.MethodGet, "/runners", nil)
	want(t, resp, body, http.StatusOK, "r1", "not connected", `action="/runners/`+id+`/revoke"`)

	resp, body = s.do(c, http.MethodPost, "/runners/nosuchrunner/revoke", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusNotFound, "Nothing was revoked:", "not found")
	resp, _ = s.do(c, http.MethodPost, "/runners/"+id+"/revoke", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %s", resp.Status)
	}
	resp, body = s.do(c, http.MethodGet, resp.Header.Get("Location"), nil)
	want(t, resp, body, http.StatusOK, "Runner "+id+" revoked: its connection is cut, and it cannot connect again.", "revoked 20")
	// Revoked again from a stale page: said so, and nothing changes.
	before, _ := s.store.Runners(t.Context())
	resp, body = s.do(c, http.MethodPost, "/runners/"+id+"/revoke", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusConflict, "Nothing was changed: runner r1 ("+id+") was revoked already, at 20")
	if after, _ := s.store.Runners(t.Context()); !after[0].Revoked.Equal(before[0].Revoked) {
		t.Fatalf("revoked again: %s, then %s", before[0].Revoked, after[0].Revoked)
	}
	if _, err := s.store.RunnerByCredential(t.Context(), cred); !errors.Is(err, sqlstore.ErrBadToken) {
		t.Fatalf("a revoked runner's credential: %v", err)
	}
}

// mint mints a registration token on the runners page with the
// lifetime ttl, for agent demo, and returns the token the page it is
// redirected to shows.
func (s *site) mint(c *http.Client, csrf, ttl string) string {
	s.t.Helper()
	resp, body := s.do(c, http.MethodPost, "/runners/tokens", url.Values{"csrf": {csrf}, "ttl": {ttl}, "agent": {"demo"}})
	if resp.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("minting: %s\n%s", resp.Status, body)
	}
	resp, body = s.do(c, http.MethodGet, resp.Header.Get("Location"), nil)
	want(s.t, resp, body, http.StatusOK, "it is not shown again")
	m := regexp.MustCompile(`id="minted-token" readonly value="(blr_[^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no token on the page:\n%s", body)
	}
	return m[1]
}

// TestUnknownSessionPage: an unknown session's page says so.
func TestUnknownSessionPage(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	s.signIn(c)
	id := lifecycle.NewID()
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusNotFound, "Session "+id+" does not exist.")
}

// TestTranscriptFollowedAsEvents: a session's transcript is followed as
// server-sent events: what it holds, then each block added or changed as
// lines are written.
func TestTranscriptFollowedAsEvents(t *testing.T) {
	s := newSite(t, false)
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "live1", AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	tw, err := s.store.Transcript(t.Context(), "live1")
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	notice := func(seq int, text string) string {
		return fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","dir":"to_client","kind":"notification","method":"session/update","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}}`+"\n", seq, text)
	}
	io.WriteString(tw, notice(1, "first words"))
	c := s.browser()
	s.signIn(c)
	next := s.follow(c, "live1", dashboard.EventReset, dashboard.EventAppend)
	name, text := next()
	answer := regexp.MustCompile(`id="(b[0-9-]+)"`).FindStringSubmatch(text)
	if name != dashboard.EventReset || !strings.Contains(text, "first words") || answer == nil {
		t.Fatalf("first event %s %q", name, text)
	}
	io.WriteString(tw, notice(2, "then more"))
	// The answer grows: its block comes again, whole, under its id.
	if name, text := next(); name != dashboard.EventAppend || !strings.Contains(text, `id="`+answer[1]+`"`) || !strings.Contains(text, "first wordsthen more") {
		t.Fatalf("next event %s %q", name, text)
	}
}

// follow opens the event stream of a session's page and returns a reader
// of its next event of the kinds named (others are skipped).
func (s *site) follow(c *http.Client, id string, kinds ...string) func() (string, string) {
	s.t.Helper()
	return s.followPath(c, "/sessions/"+id+"/events", kinds...)
}

// followPath is follow of the event stream at path.
func (s *site) followPath(c *http.Client, path string, kinds ...string) func() (string, string) {
	s.t.Helper()
	next := s.events(c, path, "", kinds...)
	return func() (string, string) {
		s.t.Helper()
		e := next()
		return e.name, e.text
	}
}

// sse is a server-sent event: its name, its id (the last one the stream
// gave) and its text.
type sse struct{ name, id, text string }

// events opens the event stream at path as a browser that reconnects
// after the event lastID ("": none) does, and returns a reader of its next
// event of the kinds named (others are skipped).
func (s *site) events(c *http.Client, path, lastID string, kinds ...string) func() sse {
	t := s.t
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.URL+path, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := bufio.NewReader(resp.Body)
	id := lastID
	return func() sse {
		t.Helper()
		var name, data string
		for {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && slices.Contains(kinds, name):
				var text string
				if err := json.Unmarshal([]byte(data), &text); err != nil {
					t.Fatalf("event %s: data %q: %v", name, data, err)
				}
				return sse{name, id, text}
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}
}

// A session's page follows its record with its transcript: when a new run
// starts, the state, runs and runner it shows change without a reload.
func TestSessionPageFollowsItsRecord(t *testing.T) {
	s := newSite(t, false)
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Runner: "r1", Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.signIn(c)
	next := s.follow(c, "p1", dashboard.EventRecord)
	if _, html := next(); !strings.Contains(html, `<dd class="state">paused</dd>`) || !strings.Contains(html, "<dt>Runs</dt><dd>1</dd>") {
		t.Fatalf("the first record event:\n%s", html)
	}
	if _, err := s.store.UpdateSession(t.Context(), "p1", func(r *lifecycle.Record) error {
		r.State, r.Runs, r.Runner = lifecycle.Active, 2, "r2"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, html := next(); !strings.Contains(html, `<dd class="state">active</dd>`) || !strings.Contains(html, "<dt>Runs</dt><dd>2</dd>") || !strings.Contains(html, `<dd><a href="/runners#runner-r2">r2</a></dd>`) {
		t.Fatalf("the record event after a new run:\n%s", html)
	}
}

// TestPromptToASessionInUseElsewhereChangesNothing: a prompt from the page
// to a session another client is running (an editor through `acp --server`)
// says so and changes nothing: the engine lets one front end at a time run a
// session.
func TestPromptToASessionInUseElsewhereChangesNothing(t *testing.T) {
	s := newSite(t, false)
	live := &lifecycle.Record{ID: "live1", AgentName: "demo", State: lifecycle.Active, Runs: 1, ACPSessionID: "a1", Settings: lifecycle.DefaultSettings()}
	if err := s.store.CreateSession(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/sessions/live1/prompt", url.Values{"csrf": {csrf}, "text": {"hello"}})
	want(t, resp, body, http.StatusConflict, "Nothing was sent: the session has a run in progress in another front end (an editor, `run`, or the dashboard); it is free once that client leaves, or after 5m0s without a message from it (its inactivity limit).", ">hello</textarea>")
	if rec, err := s.store.Session(t.Context(), "live1"); err != nil || rec.State != lifecycle.Active || rec.Runs != 1 {
		t.Fatalf("after a refused prompt: %+v, %v", rec, err)
	}
}

// TestPromptToAPausedSessionWithNoRunnerChangesNothing: a prompt to a paused
// session that no runner can resume says why; the session stays paused.
func TestPromptToAPausedSessionWithNoRunnerChangesNothing(t *testing.T) {
	s := newSite(t, false)
	paused := &lifecycle.Record{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, ACPSessionID: "a1", Settings: lifecycle.DefaultSettings(),
		Pause: &lifecycle.PauseRecord{Run: 1, Reason: lifecycle.Idle, At: time.Now()}}
	if err := s.store.CreateSession(t.Context(), paused); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	// It says why once, above the record, not again as the turn's
	// outcome; nor does the page of the next refusal show the first.
	for range 2 {
		resp, body := s.do(c, http.MethodPost, "/sessions/p1/prompt", url.Values{"csrf": {csrf}, "text": {"hello"}})
		want(t, resp, body, http.StatusConflict, "Nothing was sent: session p1: no runner of agent demo is connected")
		if n := strings.Count(body, "no runner of agent demo is connected"); n != 1 {
			t.Fatalf("the page says why %d times:\n%s", n, body)
		}
	}
	if rec, err := s.store.Session(t.Context(), "p1"); err != nil || rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("after a refused prompt: %+v, %v", rec, err)
	}
}

// TestBadPromptsAreRefused: a prompt that is empty, to an ended session, to
// an unknown one, or without the form's token says why and sends nothing.
func TestBadPromptsAreRefused(t *testing.T) {
	s := newSite(t, false)
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "done1", AgentName: "demo", State: lifecycle.Ended, EndReason: lifecycle.Closed, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/sessions/done1/prompt", url.Values{"csrf": {csrf}, "text": {"  "}})
	want(t, resp, body, http.StatusConflict, "Nothing was sent: the prompt is empty.")
	resp, body = s.do(c, http.MethodPost, "/sessions/done1/prompt", url.Values{"csrf": {csrf}, "text": {"hello"}})
	want(t, resp, body, http.StatusConflict, "Nothing was sent: session done1 is ended; only a paused or active session takes a prompt.")
	id := lifecycle.NewID()
	resp, body = s.do(c, http.MethodPost, "/sessions/"+id+"/prompt", url.Values{"csrf": {csrf}, "text": {"hello"}})
	want(t, resp, body, http.StatusNotFound, "Session "+id+" does not exist. Nothing was changed.")
	resp, body = s.do(c, http.MethodPost, "/sessions/done1/prompt", url.Values{"text": {"hello"}})
	want(t, resp, body, http.StatusForbidden, "form token is missing or wrong")
}

// TestStalePermissionAnswerChangesNothing: answering a permission request
// that no longer waits (answered, its turn over, or never asked) says so and
// changes nothing.
func TestStalePermissionAnswerChangesNothing(t *testing.T) {
	s := newSite(t, false)
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "live1", AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/sessions/live1/permissions/p0", url.Values{"csrf": {csrf}, "option": {"allow_once"}})
	want(t, resp, body, http.StatusConflict, "Nothing was answered: permission request p0 of session live1: it no longer waits for an answer (it was answered, or its turn ended).")
	resp, body = s.do(c, http.MethodPost, "/sessions/live1/permissions/p0", url.Values{"option": {"allow_once"}})
	want(t, resp, body, http.StatusForbidden, "form token is missing or wrong")
}

// TestChangesOfASessionWithNoRunnerSayWhy: a paused session's changes
// page, with no runner connected to show them, says to start one; its
// session page links no changes; a merge posted anyway is refused and
// changes nothing.
func TestChangesOfASessionWithNoRunnerSayWhy(t *testing.T) {
	s := newSite(t, false)
	rec := &lifecycle.Record{ID: "paused1", AgentName: "demo", State: lifecycle.Paused, Settings: lifecycle.DefaultSettings()}
	if err := s.store.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/paused1/changes", nil)
	want(t, resp, body, http.StatusServiceUnavailable, "no runner of agent demo is connected", `aria-current="page">Changes</a>`)
	if strings.Contains(body, "/changes/merge") {
		t.Fatalf("the changes page offers a merge with no runner:\n%s", body)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/paused1", nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "/sessions/paused1/changes") {
		t.Fatalf("the session page of a session with no runner: %s\n%s", resp.Status, body)
	}
	resp, body = s.do(c, http.MethodPost, "/sessions/paused1/changes/merge", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusConflict, "offers no merge now", "Nothing was changed.")
	resp, body = s.do(c, http.MethodPost, "/sessions/paused1/changes/apply", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusNotFound, "does merge or push, not apply")
	resp, body = s.do(c, http.MethodGet, "/sessions/nosuch/changes", nil)
	want(t, resp, body, http.StatusNotFound, "Session nosuch does not exist.")
	if got, _ := s.store.Session(t.Context(), "paused1"); got.State != lifecycle.Paused {
		t.Fatalf("after the refused actions: %s, want paused", got.State)
	}
}

// TestARunsLineFollowsItsEnd: the line that starts a run in a followed
// conversation shows, once the record has the run ended, its time and its
// pause, without a reload; also when the run ended between the page's
// rendering and its stream's start.
func TestARunsLineFollowsItsEnd(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(chunk("agent_message_chunk", "working"))
	started := time.Now().Add(-3 * time.Second)
	if _, err := s.store.UpdateSession(t.Context(), id, func(r *lifecycle.Record) error {
		r.State, r.Runs = lifecycle.Active, 1
		r.History = []lifecycle.RunRecord{{Run: 1, Kind: lifecycle.StartRun, Started: started}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.signIn(c)
	next := s.follow(c, id, dashboard.EventReset, dashboard.EventAppend)
	if _, html := next(); !strings.Contains(html, `id="run-1"`) || strings.Contains(html, "paused:") {
		t.Fatalf("the first event:\n%s", html)
	}
	rendered, err := s.store.Session(t.Context(), id) // as a page rendered now
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.UpdateSession(t.Context(), id, func(r *lifecycle.Record) error {
		r.State = lifecycle.Paused
		r.History[0].Ended = started.Add(2 * time.Second)
		r.History[0].Pause = &lifecycle.RunPause{Reason: lifecycle.Idle, MayResume: true}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	untilEnded(t, next, "the run's line after its end")
	// A page rendered while the run went on follows from its window: its
	// stream's first events give the run's line as the record has it now.
	last, err := s.store.TranscriptLast(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	next = s.followPath(c, fmt.Sprintf("/sessions/%s/events?from=0&to=%d&record=%d", id, last, rendered.Updated.UnixNano()), dashboard.EventReset, dashboard.EventAppend)
	untilEnded(t, next, "the run's line, followed from a page's window")
}

// untilEnded reads events until one gives run 1's line with its end (the
// line may come as it was first, when its stream starts).
func untilEnded(t *testing.T, next func() (string, string), what string) {
	t.Helper()
	var seen []string
	for range 3 {
		_, html := next()
		if strings.Contains(html, `id="run-1"`) && strings.Contains(html, " · 2s · paused: idle") {
			return
		}
		seen = append(seen, html)
	}
	t.Fatalf("%s: not in the events\n%s", what, strings.Join(seen, "\n"))
}

// TestAnEndedSessionsPageDoesNotSayLive: the page of an ended session says
// its conversation is whole once its stream opens, not that it follows a
// session that goes on; a paused one's says it follows.
func TestAnEndedSessionsPageDoesNotSayLive(t *testing.T) {
	s := newSite(t, false)
	for id, st := range map[string]lifecycle.State{"ended1": lifecycle.Ended, "paused1": lifecycle.Paused} {
		if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: id, AgentName: "demo", State: st, Settings: lifecycle.DefaultSettings()}); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/ended1", nil)
	want(t, resp, body, http.StatusOK, `data-live="The session has ended: this is its whole conversation."`)
	resp, body = s.do(c, http.MethodGet, "/sessions/paused1", nil)
	want(t, resp, body, http.StatusOK, `data-live="Live: the conversation follows the session as it goes on."`)
}
