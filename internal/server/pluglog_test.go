package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// TestSessionPlugLogAPIByRun: a session's plug log is answered as JSON
// lines, all of them or a run's; an unknown session and a bad run are
// refused, saying so.
func TestSessionPlugLogAPIByRun(t *testing.T) {
	l := newLab(t)
	now := time.Now().UTC()
	if err := l.store.CreateSession(t.Context(), &lifecycle.Record{ID: "s1", AgentName: "demo", State: lifecycle.Paused, Created: now}); err != nil {
		t.Fatal(err)
	}
	lines := []lifecycle.PlugLogLine{{Run: 1, Seq: 1, Level: "info", Plug: "acme/x", Msg: "one"}, {Run: 2, Seq: 1, Level: "warn", Plug: "acme/x", Msg: "two"}}
	if err := l.store.AppendPlugLog(t.Context(), "s1", lines); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp := l.request(http.MethodGet, path, "")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/v1/sessions/s1/plug-log"); code != http.StatusOK || strings.Count(body, "\n") != 2 || !strings.Contains(body, `"msg":"one"`) {
		t.Errorf("all lines: %d %s", code, body)
	}
	if code, body := get("/v1/sessions/s1/plug-log?run=2"); code != http.StatusOK || strings.Count(body, "\n") != 1 || !strings.Contains(body, `"msg":"two"`) {
		t.Errorf("run 2: %d %s", code, body)
	}
	if code, body := l.do(http.MethodGet, "/v1/sessions/s1/plug-log?run=0", ""); code != http.StatusBadRequest || !strings.Contains(body, "a run is a number from 1") {
		t.Errorf("run=0: %d %s", code, body)
	}
	if code, _ := l.do(http.MethodGet, "/v1/sessions/nosuchsession/plug-log", ""); code != http.StatusNotFound {
		t.Errorf("an unknown session: %d", code)
	}
}
