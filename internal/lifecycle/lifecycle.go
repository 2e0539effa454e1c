package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
// A report the record holds already (a resume's, most often) writes
// nothing: it is as durable as it was.
func RecordLoaded(ctx context.Context, s Sessions, id string, l Loaded) error {
	_, err := s.UpdateSession(ctx, id, func(r *Record) error {
		if r.Resumable == l.Resumable && r.Settings == l.Settings && slices.Equal(r.OrphanedState, l.OrphanedState) {
			return ErrUnchanged
		}
		r.Resumable, r.Settings, r.OrphanedState = l.Resumable, l.Settings, l.OrphanedState
		return nil
	})
	if errors.Is(err, ErrUnchanged) {
		return nil
	}
	return err
}

// ErrUnchanged is what the function of an UpdateSession returns to write
// nothing when the record holds what it would write: the store's write
// (and its syncs) is spared.
var ErrUnchanged = errors.New("the record is unchanged")

// RecordTitle records in s the session's derived title; the same title
// again changes nothing, so a report sent twice is harmless, and a title a
// person set (SetTitle) stays.
func RecordTitle(ctx context.Context, s Sessions, id, title string) error {
	rec, err := s.Session(ctx, id)
	if err != nil || rec.Title == title || rec.TitleSet {
		return err
	}
	_, err = s.UpdateSession(ctx, id, func(r *Record) error {
		if !r.TitleSet { // set since it was read
			r.Title = title
		}
		return nil
	})
	return err
}

// MaxTitle bounds a title a person sets, in characters.
const MaxTitle = 200

// CheckTitle says why a person cannot set title, or nil: it is one line of
// text, neither empty nor longer than MaxTitle.
func CheckTitle(title string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return errors.New("a title cannot be empty")
	case utf8.RuneCountInString(title) > MaxTitle:
		return fmt.Errorf("a title is at most %d characters, not %d", MaxTitle, utf8.RuneCountInString(title))
	case !utf8.ValidString(title):
		return errors.New("a title is UTF-8 text")
	case strings.ContainsFunc(title, unicode.IsControl):
		return errors.New("a title cannot hold control characters (a newline, a tab …)")
	}
	return nil
}

// SetTitle records in s the title a person set (sessions title, PATCH
// /v1/sessions/ID), its surrounding spaces trimmed; derived titles reported
// later leave it (Record.TitleSet).
func SetTitle(ctx context.Context, s Sessions, id, title string) (*Record, error) {
	if err := CheckTitle(title); err != nil {
		return nil, err
	}
	return s.UpdateSession(ctx, id, func(r *Record) error {
		r.Title, r.TitleSet = strings.TrimSpace(title), true
		return nil
	})
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
	if p.ACPSessionID != "" {
		// The front end recorded it at the answer, unless it went first.
		rec.ACPSessionID = p.ACPSessionID
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
