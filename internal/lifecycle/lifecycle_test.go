package lifecycle

import (
	"errors"
	"testing"
	"time"
)

func TestL2_TeardownBackoffThenOrphaned(t *testing.T) {
	rec := &Record{Settings: Settings{TeardownBackoff: time.Second, TeardownAttempts: 3}}
	now := time.Unix(0, 0)
	ApplyPause(rec, PauseRecord{Run: 1, Reason: Closed, At: now})
	if rec.State != TearingDown || rec.EndReason != Closed {
		t.Fatalf("after pause: %+v", rec)
	}
	var waits []time.Duration
	for rec.State == TearingDown {
		ApplyTeardown(rec, errors.New("rm failed"), now)
		if rec.State == TearingDown {
			waits = append(waits, rec.Teardown.NextAt.Sub(now))
		}
	}
	if rec.State != Orphaned || len(waits) != 2 || waits[0] != time.Second || waits[1] != 2*time.Second {
		t.Fatalf("state %s waits %v", rec.State, waits)
	}
}

// The one rule of may_resume (L4): idle and failed resume under the pause
// policy when the chain can; a stop that ends the session wins; every
// other reason ends it.
func TestL4_MayResumeOneRule(t *testing.T) {
	end := &Stop{Reason: Closed}
	idle := &Stop{Reason: Idle, MayResume: true}
	for _, tc := range []struct {
		policy    IdlePolicy
		reason    Reason
		resumable bool
		stop      *Stop
		want      bool
	}{
		{PolicyPause, Idle, true, nil, true},
		{PolicyPause, Idle, false, nil, false},
		{PolicyEnd, Idle, true, nil, false},
		{PolicyPause, Failed, true, nil, true},
		{PolicyPause, Failed, true, idle, true},
		{PolicyPause, Failed, true, end, false},
		{PolicyPause, Failed, false, nil, false},
		{PolicyEnd, Failed, true, nil, false},
		{PolicyPause, Completed, true, nil, false},
		{PolicyPause, Closed, true, nil, false},
		{PolicyPause, Cancelled, true, nil, false},
		{PolicyPause, Timeout, true, nil, false},
	} {
		if got := tc.policy.MayResume(tc.reason, tc.resumable, tc.stop); got != tc.want {
			t.Errorf("%s %s resumable=%v stop=%v: may_resume %v, want %v", tc.policy, tc.reason, tc.resumable, tc.stop, got, tc.want)
		}
	}
	if s := PolicyEnd.IdleStop(true); s != (Stop{Reason: Completed}) {
		t.Errorf("end policy: %+v", s)
	}
	if s := PolicyPause.IdleStop(false); s != (Stop{Reason: Idle}) {
		t.Errorf("pause policy, a plug cannot resume: %+v", s)
	}
}
