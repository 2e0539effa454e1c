package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// TestSessionPageShowsEachRunsPlugLog: a session's page shows the plug
// log of each run, collapsed, its last lines with their plug, level and
// attributes, escaped, and links all lines as text.
func TestSessionPageShowsEachRunsPlugLog(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	s.signIn(c)
	ctx := t.Context()
	now := time.Now()
	id := lifecycle.NewID()
	if err := s.store.CreateSession(ctx, &lifecycle.Record{ID: id, AgentName: "demo", State: lifecycle.Paused, Runs: 2, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	var lines []lifecycle.PlugLogLine
	for i := range 502 {
		lines = append(lines, lifecycle.PlugLogLine{Run: 1, Seq: i + 1, Time: now, Level: "info", Plug: "acme/x", Msg: fmt.Sprintf("line %d", i+1)})
	}
	lines[501].Msg, lines[501].Attrs = "<b>bold</b>", []string{"port", "8080"}
	lines = append(lines, lifecycle.PlugLogLine{Run: 2, Seq: 1, Time: now, Level: "warn", Plug: "acme/y", Msg: "slow"}, lifecycle.PlugLogLine{Run: 2, Seq: 2, Time: now, Dropped: 3})
	if err := s.store.AppendPlugLog(ctx, id, lines); err != nil {
		t.Fatal(err)
	}
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK, `<details class="plug-log" id="log-1"><summary>Run 1: 502 lines</summary>`,
		`The last 500: <a href="/sessions/`+id+`/plug-log?run=1">`, "&lt;b&gt;bold&lt;/b&gt; <code>port=8080</code>",
		`id="log-2"><summary>Run 2: 1 line, 3 not kept</summary>`, "<td>warn</td><td>acme/y</td><td>slow")
	if strings.Contains(body, ">line 2<") {
		t.Error("the page shows more than a run's last 500 lines")
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/"+id+"/plug-log?run=2", nil)
	want(t, resp, body, http.StatusOK, "WARN  acme/y: slow\n", "3 more lines were not kept")
	if strings.Contains(body, "acme/x") {
		t.Errorf("run 2's log holds run 1's lines:\n%s", body)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/"+id+"/plug-log?run=x", nil)
	want(t, resp, body, http.StatusBadRequest, "run=x: a run is a number from 1")
}

// TestSessionPageSaysWhenThePlugsLoggedNothing: a session whose plugs
// logged nothing (or an older runner's) says so.
func TestSessionPageSaysWhenThePlugsLoggedNothing(t *testing.T) {
	s := newSite(t, false)
	c := s.browser()
	s.signIn(c)
	now := time.Now()
	id := lifecycle.NewID()
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: id, AgentName: "demo", State: lifecycle.Paused, Runs: 1, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK, "The plugs logged nothing with <code>ctx.log</code>.")
}
