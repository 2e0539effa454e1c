package sessionview

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestL2_OrphanedListingSaysWhatToDo (L2): the listing names, for each
// orphaned session, the teardown's last error and the plugs with stored
// state, and the command that resolves it once they are cleaned up. The
// output is compared with testdata/orphaned_listing.golden
// (BLAISE_UPDATE_GOLDEN=1 rewrites it).
func TestL2_OrphanedListingSaysWhatToDo(t *testing.T) {
	st, err := filestore.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	now := created.Add(26 * time.Hour)
	for _, r := range []*lifecycle.Record{
		{ID: "paused1", State: lifecycle.Paused, Runs: 2, Pause: &lifecycle.PauseRecord{Reason: "idle"}},
		{ID: "orphan1", State: lifecycle.Orphaned, Runs: 7, Pause: &lifecycle.PauseRecord{Reason: "failed"},
			Teardown: lifecycle.TeardownRecord{Attempts: 5, LastError: "plugs/db.star:9:5: plug acme/db: on_teardown: docker compose down -v: exit status 1\nTraceback (most recent call last):\n  plugs/db.star:9:5: in on_teardown"}},
		{ID: "ended1", State: lifecycle.Ended, Runs: 1, EndReason: "closed"},
	} {
		r.Config, r.Created, r.Settings = "/work/project/blaise.star", created, lifecycle.DefaultSettings()
		if err := st.CreateSession(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct{ id, plug string }{{"wt", "blaise/worktree"}, {"db", "acme/db"}} {
		if err := st.Persisted().Set(context.Background(), "orphan1", p.id, p.plug, []byte(`{"path": "/tmp/x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := st.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := List(t.Context(), &got, st, recs, now, false); err != nil {
		t.Fatal(err)
	}
	testsupport.Golden(t, filepath.Join("testdata", "orphaned_listing.golden"), got.Bytes())
}

// TestListShowsTitlesOnlyWhenOneIsRecorded: a TITLE column appears when
// a listed session has a title, cut to its width; sessions without one
// show "-", a fork without one the session it is a fork of, and a listing
// of none has no column.
func TestListShowsTitlesOnlyWhenOneIsRecorded(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	recs := []*lifecycle.Record{
		{ID: "titled1", State: lifecycle.Active, Created: now, Title: "fix the flaky test in the store's listing of sessions"},
		{ID: "fork1", State: lifecycle.Paused, Created: now, ForkedFrom: "titled1"},
		{ID: "old1", State: lifecycle.Active, Created: now},
	}
	var got bytes.Buffer
	if err := List(t.Context(), &got, nil, recs, now, false); err != nil {
		t.Fatal(err)
	}
	out := got.String()
	if !strings.Contains(out, "AGENT  TITLE\n") || !strings.Contains(out, "  fix the flaky test in the store's listi…\n") ||
		!strings.Contains(out, "  fork of titled1\n") || !strings.HasSuffix(out, "  -\n") {
		t.Fatalf("listing:\n%s", out)
	}
	got.Reset()
	if err := List(t.Context(), &got, nil, recs[2:], now, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.String(), "TITLE") {
		t.Fatalf("a TITLE column without titles:\n%s", got.String())
	}
}
