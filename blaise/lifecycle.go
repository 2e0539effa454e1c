package blaise

import (
	"fmt"
	"time"
)

// Pause is what a run reports when it ends (L7).
type Pause struct {
	Run       int
	Reason    string
	MayResume bool
	Error     string
}

// ApplyPause records a reported pause: the session is paused until its
// paused lifetime runs out (L6), or it is over and must be torn down.
func ApplyPause(rec *SessionRecord, p Pause, now time.Time) {
	rec.Pause = &PauseRecord{Reason: p.Reason, MayResume: p.MayResume, Error: p.Error, At: now, Run: p.Run}
	if p.MayResume {
		rec.State = Paused
		rec.PausedAt = now
		rec.ExpiresAt = now.Add(rec.Settings.PausedLifetime)
		return
	}
	rec.State = TearingDown
	rec.EndReason = p.Reason
	rec.PausedAt, rec.ExpiresAt = time.Time{}, time.Time{}
	rec.Teardown.NextAt = now
}

// ApplyTeardown records the outcome of a teardown: ended, or a retry after
// a backoff that doubles from the settings' TeardownBackoff, or orphaned
// once TeardownAttempts are used up (L2).
func ApplyTeardown(rec *SessionRecord, err error, now time.Time) {
	if err == nil {
		rec.State = Ended
		rec.Teardown.NextAt = time.Time{}
		rec.Teardown.LastError = ""
		return
	}
	rec.Teardown.Attempts++
	rec.Teardown.LastError = err.Error()
	if rec.Teardown.Attempts >= rec.Settings.TeardownAttempts {
		rec.State = Orphaned
		rec.Teardown.NextAt = time.Time{}
		return
	}
	rec.State = TearingDown
	rec.Teardown.NextAt = now.Add(rec.Settings.TeardownBackoff << (rec.Teardown.Attempts - 1))
}

// StopFor returns the stop an idle session gets under its policy (L4):
// idle, which may resume unless a plug cannot, or completed.
func StopFor(rec *SessionRecord) StopRecord {
	if rec.Settings.IdlePolicy == PolicyEnd {
		return StopRecord{Reason: "completed"}
	}
	return StopRecord{Reason: "idle", MayResume: rec.Resumable}
}

// Due reports what a session at rest needs now: a teardown run for an
// expired paused session (L6) or a due teardown retry, with its end reason.
func Due(rec *SessionRecord, now time.Time) (reason string, due bool) {
	switch rec.State {
	case Paused:
		if !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt) {
			return "expired", true
		}
	case TearingDown:
		if !now.Before(rec.Teardown.NextAt) {
			return rec.EndReason, true
		}
	}
	return "", false
}

// ErrNotPaused and friends explain why a session cannot do what was asked.
func stateError(rec *SessionRecord, want string) error {
	return fmt.Errorf("session %s is %s; %s", rec.ID, rec.State, want)
}
