package server

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// sessionCount is the number of the server's sessions, as the API lists them.
func (l *lab) sessionCount() int {
	l.t.Helper()
	resp := l.request("GET", "/v1/sessions", "")
	defer resp.Body.Close()
	var recs []*lifecycle.Record
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &recs) != nil {
		l.t.Fatalf("the sessions: %d %s", resp.StatusCode, b)
	}
	return len(recs)
}

// TestAForkGoesOnlyToItsSessionsRunnerOfProtocol6: a fork of a paused
// session is refused, with nothing made, while the session's runner is not
// connected, even when another runner of its agent is (its environment is
// on its own runner's machine), and while its runner speaks protocol 5,
// saying to upgrade it; that runner's actions still work. An unknown
// session is refused as such.
func TestAForkGoesOnlyToItsSessionsRunnerOfProtocol6(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, true)
	before, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	fork := "/v1/sessions/" + ref.Session + "/fork"
	gone := "session " + ref.Session + ": its runner r1, where its environment is, is not connected"
	if status, msg := l.do("POST", fork, ""); status != 409 || !strings.Contains(msg, gone) {
		t.Errorf("no runner: %d %q, want 409 and %q", status, msg, gone)
	}
	_, st := l.runnerStreamOf(l.register("r2"), runnerproto.Version)
	frames := runnerproto.NewConn(st)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: runnerproto.Version, Runner: "r2"}); err != nil {
		t.Fatal(err)
	}
	if w, err := frames.Receive(); err != nil || w.Error != "" {
		t.Fatalf("welcome of r2: %+v %v", w, err)
	}
	if status, msg := l.do("POST", fork, ""); status != 409 || !strings.Contains(msg, gone) {
		t.Errorf("another runner of the agent: %d %q, want 409 and %q", status, msg, gone)
	}
	diff := api.Action{Name: "diff", Plug: "blaise/worktree (id wt)"}
	l.helloOf(5, diff)
	old := "runner r1 speaks runner protocol version 5, which does not do forks; upgrade it"
	if status, msg := l.do("POST", fork, ""); status != 409 || !strings.Contains(msg, old) {
		t.Errorf("a runner of protocol 5: %d %q, want 409 and %q", status, msg, old)
	}
	resp := l.request("GET", "/v1/sessions/"+ref.Session+"/actions", "")
	defer resp.Body.Close()
	var got []api.Action
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || len(got) != 1 || got[0].Name != "diff" {
		t.Fatalf("the actions of a runner of protocol 5: %d %s", resp.StatusCode, b)
	}
	if status, msg := l.do("POST", "/v1/sessions/nosuchsession/fork", ""); status != 404 || !strings.Contains(msg, "no such session") {
		t.Errorf("an unknown session: %d %q", status, msg)
	}
	after, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	if n := l.sessionCount(); n != 1 || after.State != before.State || after.Runs != before.Runs || !after.Updated.Equal(before.Updated) {
		t.Fatalf("after the refusals: %d sessions, the session %s with %d runs (was %s, %d)", n, after.State, after.Runs, before.State, before.Runs)
	}
}

// TestAForkOnADrainingRunnerIsRefusedAsDraining: a fork of a paused
// session whose runner is connected but draining (its listen is stopping)
// is refused, with nothing made, saying the runner drains rather than
// that it is not connected.
func TestAForkOnADrainingRunnerIsRefusedAsDraining(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, true)
	frames := l.helloOf(runnerproto.Version)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindDrain}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the server has the runner draining", func() bool { return strings.Contains(l.logs.String(), "runner draining") })
	fork := "/v1/sessions/" + ref.Session + "/fork"
	want := "session " + ref.Session + ": its runner r1, where its environment is, is draining: its `blaise-agent listen` is stopping and takes no new run"
	if status, msg := l.do("POST", fork, ""); status != 409 || !strings.Contains(msg, want) || strings.Contains(msg, "not connected") {
		t.Errorf("a draining runner: %d %q, want 409 and %q", status, msg, want)
	}
	if n := l.sessionCount(); n != 1 {
		t.Fatalf("%d sessions after the refusal, want the 1 there was", n)
	}
}
