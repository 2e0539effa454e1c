package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

func TestPatchingASessionSetsItsTitleAndRefusesABadOne(t *testing.T) {
	l := newLab(t)
	if err := l.store.CreateSession(t.Context(), &lifecycle.Record{ID: "s1", AgentName: "demo", State: lifecycle.Paused, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	resp := l.request(http.MethodPatch, "/v1/sessions/s1", `{"title": "fix the build"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if body := string(b); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"title":"fix the build"`) || !strings.Contains(body, `"title_set":true`) {
		t.Fatalf("set: %d %s", resp.StatusCode, body)
	}
	if err := l.store.Titled(t.Context(), "s1", "derived"); err != nil {
		t.Fatal(err)
	}
	if rec, err := l.store.Session(t.Context(), "s1"); err != nil || rec.Title != "fix the build" {
		t.Errorf("after a derived title: %v %v", rec, err)
	}
	for body, want := range map[string]string{
		`{"title": ""}`:     "a title cannot be empty",
		`{"title": "a\nb"}`: "control characters",
		`{"name": "x"}`:     "a bad body",
		`{"title": "` + strings.Repeat("x", 201) + `"}`: "at most 200 characters",
	} {
		if code, got := l.do(http.MethodPatch, "/v1/sessions/s1", body); code != http.StatusBadRequest || !strings.Contains(got, want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, code, got, want)
		}
	}
	if code, _ := l.do(http.MethodPatch, "/v1/sessions/nosuchsession", `{"title": "x"}`); code != http.StatusNotFound {
		t.Errorf("an unknown session: %d", code)
	}
}
