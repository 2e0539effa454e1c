package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTheServerRefusesAnActionsBadArgumentsBeforeItsRunner: arguments that
// the action's schema refuses, given to sessions do --server or to the API,
// are refused by the server, which names each argument and what was wanted
// (400 and the arguments in its JSON); the runner starts no run for them:
// the session's record is not touched, as a launch would.
func TestTheServerRefusesAnActionsBadArgumentsBeforeItsRunner(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	before := l.session(id)
	out := l.fails("sessions", "do", "--server", l.url, "--token", l.token, id, "diff", "stat=maybe")
	if !strings.Contains(out, "400") || !strings.Contains(out, "action diff of plug blaise/worktree (id wt): args.stat: want bool, got string") {
		t.Fatalf("sessions do --server ID diff stat=maybe:\n%s", out)
	}
	req, err := http.NewRequest("POST", l.url+"/v1/sessions/"+id+"/actions/merge", strings.NewReader(`{"squash": 1, "into": "main"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer struct {
		Args []struct{ Path, Problem string }
	}
	if err := json.Unmarshal(b, &answer); err != nil || resp.StatusCode != 400 || len(answer.Args) != 2 ||
		answer.Args[0].Path != "args.squash" || answer.Args[0].Problem != "want bool, got int" || answer.Args[1].Path != "args.into" {
		t.Fatalf("POST actions/merge with bad arguments: %d %s", resp.StatusCode, b)
	}
	if after := l.session(id); after.Updated != before.Updated || after.Runs != before.Runs || after.State != before.State {
		t.Fatalf("the session changed: %+v, was %+v", after, before)
	}
}
