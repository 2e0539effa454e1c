package lifecycle

import (
	"errors"
	"testing"
	"time"
)

// TestL7_HistoryKeepsEveryRunUpToTheLast50 (L7): each run's kind, times,
// stop, pause and teardown stay in the record after later runs, a run whose
// process never started leaves nothing, and only the last MaxHistory runs
// are kept.
func TestL7_HistoryKeepsEveryRunUpToTheLast50(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	rec := &Record{Settings: Settings{PausedLifetime: time.Hour, TeardownAttempts: 3, TeardownBackoff: time.Second}}
	BeginRun(rec, StartRun, t0)
	rec.Stop = &StopRecord{Stop: Stop{Reason: Idle, MayResume: true}, Run: 1}
	ApplyPause(rec, PauseRecord{Reason: Idle, MayResume: true, At: t0.Add(time.Minute), Run: 1})
	BeginRun(rec, ResumeRun, t0.Add(2*time.Minute))
	ForgetRun(rec) // its process could not start
	BeginRun(rec, ResumeRun, t0.Add(3*time.Minute))
	ApplyPause(rec, PauseRecord{Reason: Failed, Error: "boom", At: t0.Add(4 * time.Minute), Run: 2})
	BeginRun(rec, TeardownRun, t0.Add(5*time.Minute))
	ApplyTeardown(rec, errors.New("rm failed"), t0.Add(6*time.Minute))

	want := []RunRecord{
		{Run: 1, Kind: StartRun, Started: t0, Ended: t0.Add(time.Minute), Stop: &Stop{Reason: Idle, MayResume: true}, Pause: &RunPause{Reason: Idle, MayResume: true}},
		{Run: 2, Kind: ResumeRun, Started: t0.Add(3 * time.Minute), Ended: t0.Add(4 * time.Minute), Pause: &RunPause{Reason: Failed, Error: "boom"}},
		{Run: 3, Kind: TeardownRun, Started: t0.Add(5 * time.Minute), Ended: t0.Add(6 * time.Minute), Teardown: &RunTeardown{Reason: Failed, Error: "rm failed"}},
	}
	if rec.Runs != 3 || len(rec.History) != len(want) {
		t.Fatalf("runs %d, history %+v", rec.Runs, rec.History)
	}
	for i, h := range rec.History {
		if !sameRun(h, want[i]) {
			t.Errorf("run %d: got %+v, want %+v", i+1, h, want[i])
		}
	}
	if !rec.ExpiresAt.IsZero() {
		t.Errorf("a session torn down still expires at %s", rec.ExpiresAt)
	}

	for range 2 * MaxHistory {
		BeginRun(rec, TeardownRun, t0)
		ApplyTeardown(rec, nil, t0)
	}
	if n, first, last := len(rec.History), rec.History[0].Run, rec.History[len(rec.History)-1].Run; n != MaxHistory || last != rec.Runs || first != rec.Runs-MaxHistory+1 {
		t.Errorf("after %d runs: %d kept, runs %d to %d", rec.Runs, n, first, last)
	}
}

func sameRun(a, b RunRecord) bool {
	return a.Run == b.Run && a.Kind == b.Kind && a.Started.Equal(b.Started) && a.Ended.Equal(b.Ended) &&
		same(a.Stop, b.Stop) && same(a.Pause, b.Pause) && same(a.Teardown, b.Teardown)
}

func same[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
