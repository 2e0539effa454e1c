package session

import "time"

// ApplyPause records a reported pause, in the history too: the session is
// paused until its paused lifetime runs out (L6), or it is over and must be
// torn down.
func ApplyPause(rec *Record, p PauseRecord) {
	rec.Pause = &p
	rec.ended(p.Run, p.At).Pause = &RunPause{Reason: p.Reason, MayResume: p.MayResume, Error: p.Error}
	if p.MayResume {
		rec.State = Paused
		rec.PausedAt = p.At
		rec.ExpiresAt = p.At.Add(rec.Settings.PausedLifetime)
		return
	}
	rec.State = TearingDown
	rec.EndReason = p.Reason
	rec.PausedAt, rec.ExpiresAt = time.Time{}, time.Time{}
	rec.Teardown.NextAt = p.At
}

// ApplyTeardown records the outcome of a teardown, in the last run's
// history too: ended, or a retry after a backoff that doubles from the
// settings' TeardownBackoff, or orphaned once TeardownAttempts are used up
// (L2).
func ApplyTeardown(rec *Record, err error, now time.Time) {
	td := &RunTeardown{Reason: rec.EndReason}
	if err != nil {
		td.Error = err.Error()
	}
	rec.ended(rec.Runs, now).Teardown = td
	rec.PausedAt, rec.ExpiresAt = time.Time{}, time.Time{} // over: it expires no more
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

// Due reports what a session at rest needs now: a teardown run for an
// expired paused session (L6) or a due teardown retry, with its end reason.
func Due(rec *Record, now time.Time) (reason Reason, due bool) {
	if at, ok := DueAt(rec); ok && !now.Before(at) {
		if rec.State == Paused {
			return Expired, true
		}
		return rec.EndReason, true
	}
	return "", false
}

// DueAt is when a session at rest next needs something (see Due); ok is
// false when it needs nothing at any time.
func DueAt(rec *Record) (at time.Time, ok bool) {
	switch rec.State {
	case Paused:
		return rec.ExpiresAt, !rec.ExpiresAt.IsZero()
	case TearingDown:
		return rec.Teardown.NextAt, true
	}
	return time.Time{}, false
}
