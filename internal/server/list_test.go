package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// getSessions sends a GET with the API token and decodes the sessions it answers.
func (l *lab) getSessions(path string) (recs []*lifecycle.Record, next string) {
	l.t.Helper()
	resp := l.request(http.MethodGet, path, "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		l.t.Fatalf("GET %s: %v", path, err)
	}
	return recs, resp.Header.Get(api.HeaderNextCursor)
}

// A client that passes no limit gets the first page, the newest
// DefaultListLimit sessions, and the cursor of the next; the cursor gives
// the rest. Filters (agent, state, mine) are applied before the page is
// cut, and bad parameters are refused, saying which.
func TestSessionsListIsPagedNewestFirst(t *testing.T) {
	l := newLab(t)
	now := time.Now().UTC()
	n := api.DefaultListLimit + 30
	for i := range n {
		rec := &lifecycle.Record{ID: fmt.Sprintf("s%04d", i), AgentName: "demo", State: lifecycle.Ended, Created: now.Add(time.Duration(i) * time.Second)}
		if i%10 == 0 {
			rec.State, rec.Owner, rec.PausedAt, rec.ExpiresAt = lifecycle.Paused, "tests", now, now.Add(time.Hour)
		}
		if err := l.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	first, next := l.getSessions("/v1/sessions")
	if len(first) != api.DefaultListLimit || next == "" || first[0].ID != fmt.Sprintf("s%04d", n-1) {
		t.Fatalf("the first page: %d sessions from %s, cursor %q; want the newest %d and a cursor", len(first), first[0].ID, next, api.DefaultListLimit)
	}
	rest, last := l.getSessions("/v1/sessions?cursor=" + next)
	if len(rest) != n-api.DefaultListLimit || last != "" || rest[len(rest)-1].ID != "s0000" {
		t.Errorf("the second page: %d sessions, cursor %q; want the %d oldest and no cursor", len(rest), last, n-api.DefaultListLimit)
	}
	mine, _ := l.getSessions("/v1/sessions?agent=demo&mine=true&state=paused&limit=1000")
	if len(mine) != n/10 {
		t.Errorf("mine=true&state=paused: %d sessions, want %d", len(mine), n/10)
	}
	if none, next := l.getSessions("/v1/sessions?agent=other"); len(none) != 0 || next != "" {
		t.Errorf("the sessions of an agent that has none: %d, cursor %q", len(none), next)
	}
	for _, c := range []struct{ query, says string }{
		{"limit=0", `limit "0": want a number from 1 to 1000`},
		{"limit=1001", `limit "1001"`},
		{"limit=ten", `limit "ten"`},
		{"state=sleeping", `state "sleeping": want one of [active paused tearing_down ended orphaned]`},
		{"cursor=nope", `cursor "nope"`},
	} {
		status, msg := l.do("GET", "/v1/sessions?"+c.query, "")
		if status != http.StatusBadRequest || !strings.Contains(msg, c.says) {
			t.Errorf("?%s: %d %q, want 400 and %q", c.query, status, msg, c.says)
		}
	}
}
