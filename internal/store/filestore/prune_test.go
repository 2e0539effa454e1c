package filestore

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// TestL2_PruneRemovesOnlyEndedSessions (L2): prune removes the directories
// of sessions that ended before the cutoff, and keeps every other state, a
// session ended after the cutoff, and an ended session whose run lock a
// command holds (one that is starting to look at it at the same moment).
func TestL2_PruneRemovesOnlyEndedSessions(t *testing.T) {
	s := openTestStore(t)
	for id, st := range map[string]lifecycle.State{
		"active1": lifecycle.Active, "paused1": lifecycle.Paused, "tearing1": lifecycle.TearingDown, "orphan1": lifecycle.Orphaned,
		"ended1": lifecycle.Ended, "ended2": lifecycle.Ended, "held1": lifecycle.Ended,
	} {
		createSession(t, s, id)
		if _, err := s.UpdateSession(t.Context(), id, func(r *lifecycle.Record) error { r.State = st; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	held, err := s.tryRunLock("held1", false)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	cutoff := time.Now()
	createSession(t, s, "late1")
	if _, err := s.UpdateSession(t.Context(), "late1", func(r *lifecycle.Record) error { r.State = lifecycle.Ended; return nil }); err != nil {
		t.Fatal(err)
	}

	pruned, err := s.Prune(t.Context(), cutoff)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pruned)
	if want := []string{"ended1", "ended2"}; !slices.Equal(pruned, want) {
		t.Errorf("pruned %v, want %v", pruned, want)
	}
	for _, id := range pruned {
		if _, err := os.Stat(s.sessionDir(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("session %s: directory left: %v", id, err)
		}
	}
	recs, err := s.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, r := range recs {
		kept = append(kept, r.ID)
	}
	slices.Sort(kept)
	if want := []string{"active1", "held1", "late1", "orphan1", "paused1", "tearing1"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	entries, err := os.ReadDir(s.path(sessionsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(kept) {
		t.Errorf("sessions directory holds %d entries, want %d (no leftovers)", len(entries), len(kept))
	}
}

// TestPruneNamesBrokenRecords: a record that cannot be read is kept and
// named; the others are still pruned.
func TestPruneNamesBrokenRecords(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "ended1")
	if _, err := s.UpdateSession(t.Context(), "ended1", func(r *lifecycle.Record) error { r.State = lifecycle.Ended; return nil }); err != nil {
		t.Fatal(err)
	}
	createSession(t, s, "broken1")
	if err := os.WriteFile(s.sessionPath("broken1"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	pruned, err := s.Prune(t.Context(), time.Now())
	wantErr(t, err, "broken1", "corrupt")
	if !slices.Equal(pruned, []string{"ended1"}) {
		t.Errorf("pruned %v, want [ended1]", pruned)
	}
}
