package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
)

// helloOf connects the lab's runner speaking protocol version, whose
// hello names actions; it returns the connection's frames.
func (l *lab) helloOf(version int, actions ...api.Action) *runnerproto.Conn {
	l.t.Helper()
	_, st := l.runnerStreamOf(l.cred, version)
	frames := runnerproto.NewConn(st)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: version, Runner: "r1", Actions: actions}); err != nil {
		l.t.Fatal(err)
	}
	if w, err := frames.Receive(); err != nil || w.Kind != runnerproto.KindWelcome || w.Error != "" {
		l.t.Fatalf("welcome: %+v %v", w, err)
	}
	return frames
}

// TestARunnerTooOldForActionsIsNamedAndNothingChanges: an action of a
// session whose runner speaks protocol 4 is refused before it reaches the
// runner, saying to upgrade it, and its actions cannot be listed; the
// session's record is as it was.
func TestARunnerTooOldForActionsIsNamedAndNothingChanges(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, true)
	before, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	l.helloOf(4)
	want := "runner r1 speaks runner protocol version 4, which does not do actions; upgrade it"
	if status, msg := l.do("POST", "/v1/sessions/"+ref.Session+"/actions/diff", `{"stat": true}`); status != 409 || !strings.Contains(msg, want) {
		t.Errorf("an action: %d %q, want 409 and %q", status, msg, want)
	}
	if status, msg := l.do("GET", "/v1/sessions/"+ref.Session+"/actions", ""); status != 409 || !strings.Contains(msg, want) {
		t.Errorf("the list of actions: %d %q, want 409 and %q", status, msg, want)
	}
	after, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != before.State || after.Runs != before.Runs || after.Config != before.Config || after.Updated != before.Updated {
		t.Fatalf("the record changed: %+v, was %+v", after, before)
	}
}

// TestTheActionsOfASessionAreItsRunnersAndBadRequestsAreRefused: a
// session's actions are those its runner's hello named; an unknown
// session, arguments that are not a JSON object and no runner connected
// are refused, each saying why.
func TestTheActionsOfASessionAreItsRunnersAndBadRequestsAreRefused(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, true)
	if status, msg := l.do("POST", "/v1/sessions/"+ref.Session+"/actions/diff", ""); status != 409 || !strings.Contains(msg, "no runner of agent demo is connected") {
		t.Errorf("no runner: %d %q", status, msg)
	}
	diff := api.Action{Name: "diff", Plug: "blaise/worktree (id wt)", Doc: "The session's changes.", Args: []api.ActionArg{{Name: "stat", Kind: "bool"}}}
	l.helloOf(runnerproto.Version, diff)
	resp := l.request("GET", "/v1/sessions/"+ref.Session+"/actions", "")
	defer resp.Body.Close()
	var got []api.Action
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || len(got) != 1 || got[0].Name != "diff" || got[0].Args[0].Kind != "bool" {
		t.Fatalf("the actions: %d %s", resp.StatusCode, got)
	}
	for _, c := range []struct {
		name, path, body, says string
		status                 int
	}{
		{"an unknown session", "/v1/sessions/nosuchsession/actions/diff", "", "no such session", 404},
		{"arguments not an object", "/v1/sessions/" + ref.Session + "/actions/diff", `["--stat"]`, "a JSON object", 400},
		{"arguments not JSON", "/v1/sessions/" + ref.Session + "/actions/diff", `{stat}`, "a JSON object", 400},
	} {
		if status, msg := l.do("POST", c.path, c.body); status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %q, want %d and %q", c.name, status, msg, c.status, c.says)
		}
	}
}

// TestArgumentsAnActionsSchemaRefusesAreRefusedByTheServer: arguments
// that the action's schema, as the runner's hello gave it, refuses are
// answered 400, naming each argument and what was wanted; the session's
// record is as it was and the runner is not asked: the first launch it
// gets is that of the next action, whose arguments are right.
func TestArgumentsAnActionsSchemaRefusesAreRefusedByTheServer(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, true)
	before, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"kind": "object", "fields": [
		{"name": "stat", "schema": {"kind": "bool", "default": false}},
		{"name": "n", "schema": {"kind": "int", "min": 1, "default": 1}}]}`
	frames := l.helloOf(runnerproto.Version, api.Action{Name: "diff", Plug: "blaise/worktree (id wt)", Schema: json.RawMessage(schema)})
	path := "/v1/sessions/" + ref.Session + "/actions/diff"
	resp := l.request("POST", path, `{"stat": "maybe", "n": "0", "sat": true}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 400 {
		t.Fatalf("bad arguments: %d %s, want 400 and an error", resp.StatusCode, b)
	}
	want := []api.ArgProblem{
		{Path: "args.stat", Problem: "want bool, got string"},
		{Path: "args.n", Problem: "want int ≥ 1, got 0"},
		{Path: "args.sat", Problem: "unknown field (want one of stat, n)"},
	}
	if fmt.Sprint(e.Args) != fmt.Sprint(want) || !strings.Contains(e.Error, "action diff of plug blaise/worktree (id wt): args.stat: want bool, got string") {
		t.Errorf("the error: %s\nwant the arguments %v", b, want)
	}
	after, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != before.State || after.Runs != before.Runs || after.Runner != before.Runner || after.Updated != before.Updated {
		t.Fatalf("the record changed: %+v, was %+v", after, before)
	}
	answered := make(chan error, 1)
	go func() {
		req, err := http.NewRequest("POST", l.srv.URL+path, strings.NewReader(`{"stat": "true"}`))
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+l.token)
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		answered <- err
	}()
	f, err := frames.Receive()
	if err != nil || f.Kind != runnerproto.KindLaunch || !slices.Contains(f.Launch.Flags, `{"stat": "true"}`) {
		t.Fatalf("the runner's first frame: %+v %v, want the launch of the action with good arguments", f, err)
	}
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &f.Launch.RunRef, Error: "not this time"}); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
