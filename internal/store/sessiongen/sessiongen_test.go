package sessiongen

import (
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// The generated history is what the lifecycle leaves: the promised mix of
// states, valid ids, and nothing due before a day has passed.
func TestRecordsAreAtRestAndNotDueForADay(t *testing.T) {
	now := time.Now()
	recs := Records(1000, "demo", "gen", now)
	count := map[lifecycle.State]int{}
	ids := map[string]bool{}
	for _, r := range recs {
		count[r.State]++
		if err := lifecycle.CheckID("id", r.ID); err != nil || ids[r.ID] {
			t.Fatalf("id %q: %v (or twice)", r.ID, err)
		}
		ids[r.ID] = true
		if at, ok := lifecycle.DueAt(r); ok && at.Before(now.Add(24*time.Hour)) {
			t.Errorf("session %s (%s) is due at %v", r.ID, r.State, at)
		}
		if len(r.History) == 0 || r.Runs != r.History[len(r.History)-1].Run {
			t.Errorf("session %s: history %+v of %d runs", r.ID, r.History, r.Runs)
		}
	}
	want := map[lifecycle.State]int{lifecycle.Paused: 100, lifecycle.TearingDown: 10, lifecycle.Orphaned: 10, lifecycle.Ended: 880}
	for st, n := range want {
		if count[st] != n {
			t.Errorf("%d sessions %s, want %d (all: %v)", count[st], st, n, count)
		}
	}
}
