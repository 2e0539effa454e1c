package filestore

import (
	"context"
	"errors"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
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
