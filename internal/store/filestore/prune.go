package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// Prune removes what the store keeps of sessions that ended before cutoff:
// their directories, records and transcripts. It never touches a session in
// another state, nor one a command holds the run lock of: the state is read
// again under the run lock and the store's exclusive lock, so a run or an
// end starting at the same moment either sees the session gone or keeps it.
// Records that cannot be read are left alone and named in the error, after
// the others are pruned.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (pruned []string, err error) {
	recs, err := s.Sessions(ctx)
	var broken *lifecycle.BrokenError
	if err != nil && !errors.As(err, &broken) {
		return nil, err
	}
	errs := []error{err}
	for _, r := range recs {
		if r.State != lifecycle.Ended || !r.Updated.Before(cutoff) {
			continue
		}
		ok, err := s.pruneSession(ctx, r.ID, cutoff)
		if ok {
			pruned = append(pruned, r.ID)
		}
		errs = append(errs, err)
	}
	return pruned, errors.Join(errs...)
}

// pruneSession removes one ended session, if it is still ended before
// cutoff and no one holds its run lock.
func (s *Store) pruneSession(ctx context.Context, id string, cutoff time.Time) (bool, error) {
	l, err := s.lockRunOnce(id, false)
	if errors.Is(err, lifecycle.ErrRunHeld) || errors.Is(err, lifecycle.ErrNotFound) {
		return false, nil // in use, or pruned by someone else
	}
	if err != nil {
		return false, err
	}
	defer l.Release()
	pruned := false
	err = s.withLock(ctx, true, func() error {
		rec, err := s.readSession(id)
		if errors.Is(err, lifecycle.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.State != lifecycle.Ended || !rec.Updated.Before(cutoff) {
			return nil
		}
		pruned = true
		return s.removeSession(id)
	})
	return pruned, err
}

// Discard removes a session that never ran a plug: its record and its
// files, as if it had never been. The caller holds its run lock.
func (s *Store) Discard(ctx context.Context, id string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	return s.withLock(ctx, true, func() error { return s.removeSession(id) })
}

// removeSession removes a session's directory; the caller holds the
// store's lock and the session's run lock. It is renamed to a hidden name
// first, which readers skip: the session vanishes at once, even if
// removing its files is cut short.
func (s *Store) removeSession(id string) error {
	gone := s.path(sessionsDir, "."+id+".tmp-gone")
	if err := os.Rename(s.sessionDir(id), gone); err != nil {
		return fmt.Errorf("session %s: removing it: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.path(sessionsDir)); err != nil {
		return fmt.Errorf("session %s: removing it: %w", id, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("session %s: removing %s: %w", id, gone, err)
	}
	return nil
}
