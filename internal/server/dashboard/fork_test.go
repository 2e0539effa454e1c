package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// A paused session's page has a Fork button, which asks first and, once
// confirmed, says why no fork was made (here: the session's runner is not
// connected), with nothing made; a session that is not paused has none.
// A fork's page names the session it was forked from and, just made, says
// so.
func TestForkAsksFirstAndSaysWhyNoForkWasMade(t *testing.T) {
	s := newSite(t, false)
	reg, _ := s.store.MintRegistration(t.Context(), time.Hour)
	_, runner, err := s.store.Register(t.Context(), reg.Token, "r1")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*lifecycle.Record{
		{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Settings: lifecycle.DefaultSettings(), Resumable: true, Runner: "r1", RunnerID: runner},
		{ID: "e1", AgentName: "demo", State: lifecycle.Ended, Runs: 2, Settings: lifecycle.DefaultSettings(), Runner: "r1", RunnerID: runner},
		{ID: "f1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Settings: lifecycle.DefaultSettings(), Runner: "r1", RunnerID: runner, ForkedFrom: "p1"},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/p1", nil)
	want(t, resp, body, http.StatusOK, `action="/sessions/p1/fork"`, "Fork this session")
	if resp, body := s.do(c, http.MethodGet, "/sessions/e1", nil); resp.StatusCode != http.StatusOK || strings.Contains(body, "/fork") {
		t.Fatalf("an ended session's page offers a fork: %s", resp.Status)
	}
	resp, body = s.do(c, http.MethodPost, "/sessions/p1/fork", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusOK, `<h2 id="question">Fork session p1?</h2>`, `name="confirmed" value="yes"`, `action="/sessions/p1/fork"`)
	resp, body = s.do(c, http.MethodPost, "/sessions/p1/fork", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusConflict, "Session p1 was not forked: session p1: its runner r1, where its environment is, is not connected")
	resp, body = s.do(c, http.MethodPost, "/sessions/nosuch/fork", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	want(t, resp, body, http.StatusNotFound, "Session nosuch does not exist. Nothing was made.")
	if recs, err := s.store.Sessions(t.Context()); err != nil || len(recs) != 3 {
		t.Fatalf("after the refused forks: %d sessions (%v), want the 3 there were", len(recs), err)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/f1?forked=p1", nil)
	want(t, resp, body, http.StatusOK, `<dt>Forked from</dt><dd><a href="/sessions/p1">p1</a></dd>`, "Forked: this is a new session, paused")
}
