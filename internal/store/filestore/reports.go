package filestore

import (
	"context"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// The file store is a store of the control plane (lifecycle).
var (
	_ lifecycle.Sessions    = (*Store)(nil)
	_ lifecycle.Transcripts = (*Store)(nil)
	_ lifecycle.Reports     = (*Store)(nil)
	_ lifecycle.Store       = (*Store)(nil)
	_ lifecycle.RunLocks    = (*Store)(nil)
)

// Loaded records a run's first report (lifecycle.RecordLoaded).
func (s *Store) Loaded(ctx context.Context, id string, l lifecycle.Loaded) error {
	return lifecycle.RecordLoaded(ctx, s, id, l)
}

// Titled records the session's title (lifecycle.RecordTitle).
func (s *Store) Titled(ctx context.Context, id, title string) error {
	return lifecycle.RecordTitle(ctx, s, id, title)
}

// Paused records a reported pause (lifecycle.RecordPaused).
func (s *Store) Paused(ctx context.Context, id string, p lifecycle.PauseRecord) (*lifecycle.Record, error) {
	return lifecycle.RecordPaused(ctx, s, id, p)
}

// TornDown records a teardown's outcome: the session ends and its
// persisted state goes, or a retry is due (L2).
func (s *Store) TornDown(ctx context.Context, id string, failure error, at time.Time) (*lifecycle.Record, error) {
	rec, err := s.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		lifecycle.ApplyTeardown(r, failure, at)
		return nil
	})
	if err == nil && rec.State == lifecycle.Ended {
		err = s.DeletePersisted(ctx, id)
	}
	return rec, err
}
