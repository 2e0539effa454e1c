package sessionview

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestM5_LogRendersTheTranscript (M5): a transcript of real runs of the demo
// agent, and hand-made records of plugs that answered, render as run renders
// a session: prompts, thoughts, tool calls, plans, answers, permission
// decisions and who made them, errors, and a line that is not a record named
// on the side.
func TestM5_LogRendersTheTranscript(t *testing.T) {
	var out, errs bytes.Buffer
	l := &Log{Term: &client.Terminal{Out: &out}, Err: &errs}
	if err := Lines(context.Background(), filepath.Join("testdata", "transcript.jsonl"), nil, l.Record); err != nil {
		t.Fatal(err)
	}
	l.Term.EndTurn("")
	testsupport.Golden(t, filepath.Join("testdata", "log.golden"), out.Bytes())
	if want := "transcript line 63: not a record: invalid character 'o' in literal null (expecting 'u')\n"; errs.String() != want {
		t.Errorf("diagnostics %q, want %q", errs.String(), want)
	}
}

// TestL2_ShowSaysAllTheRecordKeeps (L2, L6, L7): an orphaned session shows
// where it was created, its settings, its last stop, pause and teardown with
// their errors, its stored and orphaned state, its transcript, and what to
// do; a paused one when it expires.
func TestL2_ShowSaysAllTheRecordKeeps(t *testing.T) {
	st, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	now := created.Add(26 * time.Hour)
	orphan := &lifecycle.Record{ID: "orphan1", State: lifecycle.Orphaned, Runs: 7, AgentName: "demo", EndReason: "timeout",
		Stop:          &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: "timeout"}, At: created.Add(2 * time.Hour), Run: 7, Delivered: true},
		Pause:         &lifecycle.PauseRecord{Reason: "failed", Error: "plugs/db.star:4:9: plug acme/db: on_session: boom", At: created.Add(2 * time.Hour), Run: 7},
		Teardown:      lifecycle.TeardownRecord{Attempts: 5, LastError: "plugs/db.star:9:5: plug acme/db: on_teardown: docker compose down -v: exit status 1\nTraceback (most recent call last):\n  plugs/db.star:9:5: in on_teardown"},
		OrphanedState: []string{"old"},
	}
	paused := &lifecycle.Record{ID: "paused1", State: lifecycle.Paused, Runs: 2, Resumable: true,
		Pause:    &lifecycle.PauseRecord{Reason: "idle", MayResume: true, At: now.Add(-time.Hour), Run: 2},
		PausedAt: now.Add(-time.Hour), ExpiresAt: now.Add(23 * time.Hour),
	}
	for _, r := range []*lifecycle.Record{orphan, paused} {
		r.Config, r.Dir, r.Settings = "/work/project/blaise.star", "/work/project", lifecycle.DefaultSettings()
		if err := st.CreateSession(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		// The store stamps its own times; the golden needs fixed ones.
		if _, err := st.UpdateSession(t.Context(), r.ID, func(*lifecycle.Record) error { return nil }); err != nil {
			t.Fatal(err)
		}
		r.Created, r.Updated = created, now.Add(-time.Hour)
	}
	for _, p := range []struct{ id, plug string }{{"wt", "blaise/worktree"}, {"old", "acme/old"}} {
		if err := st.Persisted().Set(context.Background(), "orphan1", p.id, p.plug, []byte(`{"path": "/tmp/x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	transcript, err := os.ReadFile(filepath.Join("testdata", "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.TranscriptPath("orphan1"), transcript, 0o600); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, r := range []*lifecycle.Record{orphan, paused} {
		if err := Show(t.Context(), &got, st, r, now, nil); err != nil {
			t.Fatal(err)
		}
		got.WriteString("\n")
	}
	testsupport.Golden(t, filepath.Join("testdata", "show.golden"), bytes.ReplaceAll(got.Bytes(), []byte(st.Dir()), []byte("$STATE")))
}

// TestShowTablesEveryRun: show lists the runs the record keeps, each with
// its kind, times, stop, pause and teardown, then their errors; it says when
// earlier runs are no longer kept.
func TestShowTablesEveryRun(t *testing.T) {
	st, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return created.Add(time.Duration(m) * time.Minute) }
	rec := &lifecycle.Record{ID: "runs1", Config: "/work/project/blaise.star", Dir: "/work/project", Settings: lifecycle.DefaultSettings(), Created: created, Updated: at(60)}
	for i := range 3 {
		lifecycle.BeginRun(rec, lifecycle.ResumeRun, at(2*i))
		rec.Stop = &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}, At: at(2*i + 1), Run: rec.Runs}
		lifecycle.ApplyPause(rec, lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: at(2*i + 1), Run: rec.Runs})
	}
	rec.History = rec.History[1:] // as if it had gone past lifecycle.MaxHistory
	rec.Stop = nil
	lifecycle.BeginRun(rec, lifecycle.ResumeRun, at(10))
	lifecycle.ApplyPause(rec, lifecycle.PauseRecord{Reason: lifecycle.Failed, Error: "plugs/db.star:4:9: plug acme/db: on_session: boom\nTraceback (most recent call last):\n  plugs/db.star:4:9: in on_session", At: at(11), Run: rec.Runs})
	lifecycle.BeginRun(rec, lifecycle.TeardownRun, at(20))
	lifecycle.ApplyTeardown(rec, errors.New("plugs/db.star:9:5: plug acme/db: on_teardown: exit status 1"), at(21))
	rec.Stop = &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: lifecycle.Timeout}, At: at(31), Run: rec.Runs + 1}
	lifecycle.BeginRun(rec, lifecycle.TeardownRun, at(30)) // still running
	if err := st.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Show(t.Context(), &got, st, rec, at(60), nil); err != nil {
		t.Fatal(err)
	}
	testsupport.Golden(t, filepath.Join("testdata", "history.golden"), bytes.ReplaceAll(got.Bytes(), []byte(st.Dir()), []byte("$STATE")))
}

// TestTheActionsLineUpWithTheFields: the lines sessions show adds for
// actions (the changes, the actions offered) are in the columns of the
// record's fields, whatever the longest key of either.
func TestTheActionsLineUpWithTheFields(t *testing.T) {
	st, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &lifecycle.Record{ID: "act1", Config: "/work/project/blaise.star", Dir: "/work/project", State: lifecycle.Paused, Settings: lifecycle.DefaultSettings(),
		Changes: &lifecycle.Changes{Added: 1, Files: 1}}
	if err := st.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	list := []api.Action{{Name: "diff", Doc: "Show the diff."}, {Name: "merge", Doc: "Merge it."}}
	var got bytes.Buffer
	if err := Show(t.Context(), &got, st, rec, time.Now(), ServerActions(rec, list, nil, "https://b")); err != nil {
		t.Fatal(err)
	}
	column := func(key string) int {
		for line := range strings.Lines(got.String()) {
			if rest, ok := strings.CutPrefix(line, key); ok {
				return len(key) + len(rest) - len(strings.TrimLeft(rest, " "))
			}
		}
		t.Fatalf("no %q line in\n%s", key, got.String())
		return 0
	}
	if a, s, c := column("actions:"), column("state:"), column("changes:"); a != s || c != s {
		t.Errorf("values at %d (actions), %d (changes), %d (state):\n%s", a, c, s, got.String())
	}
}
