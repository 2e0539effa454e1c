package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/store/sessiongen"
)

// `sessions --server` lists a page of the server's sessions, newest first,
// and says on stderr how to get the next one (--cursor) or every one
// (--all); --state filters on the server.
func TestSessionsOfAServerComeInPages(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	store, err := server.StoreOptions{Data: l.data}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 12: 10 paused, one being torn down, one orphaned (sessiongen).
	recs := sessiongen.Records(12, "demo", "gen", time.Now())
	if err := store.CreateSessions(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	store.Close()
	var newestFirst []string
	for _, r := range slices.Backward(recs) {
		newestFirst = append(newestFirst, r.ID)
	}
	list := func(args ...string) (ids []string, out string) {
		t.Helper()
		out = l.cli(append([]string{"sessions", "--server", l.url, "--token", l.token}, args...)...)
		if i := strings.Index(out, "["); i >= 0 && slices.Contains(args, "--json") {
			var got []*lifecycle.Record
			if err := json.Unmarshal([]byte(out[i:strings.LastIndex(out, "]")+1]), &got); err != nil {
				t.Fatalf("sessions %v: %v\n%s", args, err, out)
			}
			for _, r := range got {
				ids = append(ids, r.ID)
			}
		}
		return ids, out
	}
	ids, out := list("--limit", "5", "--json")
	if !slices.Equal(ids, newestFirst[:5]) {
		t.Errorf("--limit 5: %v, want %v", ids, newestFirst[:5])
	}
	m := regexp.MustCompile(`more sessions: add --cursor (\S+) for the next page, or --all for every one`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("--limit 5 of 12 does not say how to go on:\n%s", out)
	}
	if ids, _ := list("--limit", "5", "--cursor", m[1], "--json"); !slices.Equal(ids, newestFirst[5:10]) {
		t.Errorf("--cursor: %v, want %v", ids, newestFirst[5:10])
	}
	if ids, out := list("--all", "--limit", "5", "--json"); !slices.Equal(ids, newestFirst) || strings.Contains(out, "more sessions") {
		t.Errorf("--all: %v, want %v\n%s", ids, newestFirst, out)
	}
	if _, out := list("--state", "orphaned"); !strings.Contains(out, recs[11].ID+"  orphaned") || strings.Count(out, "  paused") != 0 {
		t.Errorf("--state orphaned: want %s alone:\n%s", recs[11].ID, out)
	}
	b, err := exec.Command(l.bin, "sessions", "--limit", "5", "--state-dir", t.TempDir()).CombinedOutput()
	if out := string(b); err == nil || !strings.Contains(out, "--state, --limit and --cursor page a server's list (--server URL)") {
		t.Errorf("--limit without --server: %v\n%s", err, b)
	}
}
