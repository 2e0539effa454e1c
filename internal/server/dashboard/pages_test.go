package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// formOf returns the fields of the page's form posting to action, as a
// browser would send them untouched: hidden and text inputs, the checked
// radio buttons and the selected options.
func formOf(t *testing.T, page, action string) url.Values {
	t.Helper()
	i := strings.Index(page, `action="`+action+`"`)
	if i < 0 {
		t.Fatalf("no form posting to %s:\n%s", action, page)
	}
	form := page[i : i+strings.Index(page[i:], "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input([^>]*)>`).FindAllStringSubmatch(form, -1) {
		attr := func(a string) string {
			if m := regexp.MustCompile(a + `="([^"]*)"`).FindStringSubmatch(m[1]); m != nil {
				return m[1]
			}
			return ""
		}
		if attr("type") == "radio" && !strings.Contains(m[1], "checked") {
			continue
		}
		v.Add(attr("name"), attr("value"))
	}
	for _, sel := range regexp.MustCompile(`(?s)<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>`).FindAllStringSubmatch(form, -1) {
		if o := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(sel[2]); o != nil {
			v.Set(sel[1], o[1])
		}
	}
	return v
}

func (s *site) setLifetime(d time.Duration) {
	s.t.Helper()
	if _, err := s.store.UpdateAgent(s.t.Context(), "demo", func(a *sqlstore.Agent) error {
		a.Settings.PausedLifetime = d
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
}

// L1: a paused lifetime the page does not offer (set with `agents set`)
// is shown selected, as an option of its own, and saving the form with
// another field changed keeps it; a field the person did not touch is not
// written, even when it changed meanwhile.
func TestL1_AgentFormKeepsAPausedLifetimeItDoesNotOffer(t *testing.T) {
	s := newSite(t, false)
	s.setLifetime(36 * time.Hour)
	c := s.browser()
	s.signIn(c)
	resp, page := s.do(c, http.MethodGet, "/agents/demo", nil)
	want(t, resp, page, http.StatusOK, `<option value="36h0m0s" selected>36 hours (set with agents set)</option>`)
	form := formOf(t, page, "/agents/demo")
	form.Set("idle_policy", "end")
	if resp, body := s.do(c, http.MethodPost, "/agents/demo", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the idle policy: %s\n%s", resp.Status, body)
	}
	a, _ := s.store.Agent(t.Context(), "demo")
	if a.Settings.PausedLifetime != 36*time.Hour || a.Settings.IdlePolicy != lifecycle.PolicyEnd {
		t.Fatalf("after saving the idle policy: %s, %s; want end, 36h", a.Settings.IdlePolicy, a.Settings.PausedLifetime)
	}

	// The page was loaded; `agents set` changes the lifetime; the page's
	// form, saved with the policy changed back, leaves the new lifetime.
	_, page = s.do(c, http.MethodGet, "/agents/demo", nil)
	form = formOf(t, page, "/agents/demo")
	s.setLifetime(48 * time.Hour)
	form.Set("idle_policy", "pause")
	if resp, body := s.do(c, http.MethodPost, "/agents/demo", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving a stale form: %s\n%s", resp.Status, body)
	}
	if a, _ := s.store.Agent(t.Context(), "demo"); a.Settings.PausedLifetime != 48*time.Hour || a.Settings.IdlePolicy != lifecycle.PolicyPause {
		t.Fatalf("after saving a stale form: %s, %s; want pause, 48h", a.Settings.IdlePolicy, a.Settings.PausedLifetime)
	}
}

// L1: with an operator's maximum under an hour, the page offers the
// maximum, shows the stored lifetime (and that sessions get the maximum),
// and saves the idle policy; the store caps the lifetime as it does for
// `agents set` (L1: asking for more gets the cap).
func TestL1_AgentFormUnderAMaximumOfLessThanAnHour(t *testing.T) {
	s := newSite(t, false)                                // its agent is created under the default maximum
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "1800000") // 30 minutes
	c := s.browser()
	s.signIn(c)
	resp, page := s.do(c, http.MethodGet, "/agents/demo", nil)
	want(t, resp, page, http.StatusOK, `<option value="30m0s" >30 minutes</option>`,
		`<option value="24h0m0s" selected>1 day, above the operator&#39;s maximum: sessions get 30 minutes, and a save stores it (L1)</option>`)
	form := formOf(t, page, "/agents/demo")
	form.Set("idle_policy", "end")
	if resp, body := s.do(c, http.MethodPost, "/agents/demo", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the idle policy: %s\n%s", resp.Status, body)
	}
	if a, _ := s.store.Agent(t.Context(), "demo"); a.Settings.IdlePolicy != lifecycle.PolicyEnd || a.Settings.PausedLifetime != 30*time.Minute {
		t.Fatalf("after saving the idle policy: %+v", a.Settings)
	}
}

// Ending, resolving and revoking ask first, naming what they act on, and
// change nothing until confirmed; the question is a page of its own, so
// it works without script.
func TestDestructiveActionsAskFirst(t *testing.T) {
	s := newSite(t, false)
	for _, rec := range []*lifecycle.Record{
		{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Settings: lifecycle.DefaultSettings()},
		{ID: "o1", AgentName: "demo", State: lifecycle.Orphaned, Settings: lifecycle.DefaultSettings(), Teardown: lifecycle.TeardownRecord{Attempts: 3, LastError: "device busy"}},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	reg, _ := s.store.MintRegistration(t.Context(), time.Hour)
	_, runner, err := s.store.Register(t.Context(), reg.Token, "r1")
	if err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	for path, question := range map[string]string{
		"/sessions/p1/end":               "End session p1?",
		"/sessions/o1/resolve":           "Resolve session o1?",
		"/runners/" + runner + "/revoke": "Revoke runner r1 (" + runner + ")?",
	} {
		resp, body := s.do(c, http.MethodPost, path, url.Values{"csrf": {csrf}})
		want(t, resp, body, http.StatusOK, `<h2 id="question">`+question+`</h2>`, `name="confirmed" value="yes"`, `action="`+path+`"`, `class="danger"`)
	}
	if rec, _ := s.store.Session(t.Context(), "p1"); rec.State != lifecycle.Paused {
		t.Fatalf("p1 after an unconfirmed End: %s", rec.State)
	}
	if rec, _ := s.store.Session(t.Context(), "o1"); rec.State != lifecycle.Orphaned {
		t.Fatalf("o1 after an unconfirmed Resolve: %s", rec.State)
	}
	if rs, _ := s.store.Runners(t.Context()); !rs[0].Revoked.IsZero() {
		t.Fatal("r1 revoked unconfirmed")
	}
	// The list styles them as destructive.
	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK, `class="danger" aria-label="End session p1"`, `class="danger" aria-label="Resolve session o1"`)
}
