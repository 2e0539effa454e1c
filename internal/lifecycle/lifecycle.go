package lifecycle

import (
	"context"
	"fmt"
	"time"
)

// ApplyUpdate is the step every store's UpdateSession takes on the record
// it read: f changes it, which may not change its id, and Updated is now.
func ApplyUpdate(rec *Record, f func(*Record) error, now time.Time) error {
	id := rec.ID
	if err := f(rec); err != nil {
		return err
	}
	if rec.ID != id {
		return fmt.Errorf("session %s: an update may not change the id (to %q)", id, rec.ID)
	}
	rec.Updated = now
	return nil
}

// RecordLoaded records in s a run's first report (L7): whether its chain
// can resume, the settings in force and the orphaned plug state.
func RecordLoaded(ctx context.Context, s Sessions, id string, l Loaded) error {
	_, err := s.UpdateSession(ctx, id, func(r *Record) error {
		r.Resumable, r.Settings, r.OrphanedState = l.Resumable, l.Settings, l.OrphanedState
		return nil
	})
	return err
}

// RecordTitle records in s the session's title; the same title again
// changes nothing, so a report sent twice is harmless.
func RecordTitle(ctx context.Context, s Sessions, id, title string) error {
	rec, err := s.Session(ctx, id)
	if err != nil || rec.Title == title {
		return err
	}
	_, err = s.UpdateSession(ctx, id, func(r *Record) error {
		r.Title = title
		return nil
	})
	return err
}

// RecordPaused records in s a reported pause (L6, L7).
func RecordPaused(ctx context.Context, s Sessions, id string, p PauseRecord) (*Record, error) {
	return s.UpdateSession(ctx, id, func(r *Record) error {
		ApplyPause(r, p)
		return nil
	})
}

// ApplyPause records a reported pause, in the history too: the session is
// paused until its paused lifetime runs out (L6), or it is over and must be
// torn down.
func ApplyPause(rec *Record, p PauseRecord) {
	rec.Pause = &p
	if p.Changes != nil {
		rec.Changes = p.Changes
	}
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

// DueKey is when rec is next due (DueAt) as an index keeps it: Unix
// nanoseconds, at least 1; 0 when it is never due.
func DueKey(rec *Record) int64 {
	at, ok := DueAt(rec)
	if !ok {
		return 0
	}
	return max(at.UnixNano(), 1)
}

// DueIn is DueSessions answered by reading recs, for a store without an
// index (the file store of one machine, whose sessions are few).
func DueIn(recs []*Record, now time.Time) (ids []string, next time.Time) {
	for _, rec := range recs {
		at, ok := DueAt(rec)
		switch {
		case rec.State == Active || ok && !now.Before(at):
			ids = append(ids, rec.ID)
		case ok && (next.IsZero() || at.Before(next)):
			next = at
		}
	}
	return ids, next
}
