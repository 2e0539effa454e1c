package sessiongen

import (
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/session"
)

// The generated history is what the lifecycle leaves: the promised mix of
// states, valid ids, and nothing due before a day has passed.
func TestRecordsAreAtRestAndNotDueForADay(t *testing.T) {
	now := time.Now()
	recs := Records(1000, "demo", "gen", now)
	count := map[session.State]int{}
	ids := map[string]bool{}
	for _, r := range recs {
		count[r.State]++
		if err := session.CheckID("id", r.ID); err != nil || ids[r.ID] {
			t.Fatalf("id %q: %v (or twice)", r.ID, err)
		}
		ids[r.ID] = true
		if at, ok := session.DueAt(r); ok && at.Before(now.Add(24*time.Hour)) {
			t.Errorf("session %s (%s) is due at %v", r.ID, r.State, at)
		}
		if len(r.History) == 0 || r.Runs != r.History[len(r.History)-1].Run {
			t.Errorf("session %s: history %+v of %d runs", r.ID, r.History, r.Runs)
		}
	}
	want := map[session.State]int{session.Paused: 100, session.TearingDown: 10, session.Orphaned: 10, session.Ended: 880}
	for st, n := range want {
		if count[st] != n {
			t.Errorf("%d sessions %s, want %d (all: %v)", count[st], st, n, count)
		}
	}
}
