package blaise

import (
	"time"

	"github.com/blaiseagent/blaise-agent/session"
)

// The store is the control plane's store of session.
var (
	_ session.Sessions    = (*Store)(nil)
	_ session.Transcripts = (*Store)(nil)
	_ session.Reports     = (*Store)(nil)
	_ session.Store       = (*Store)(nil)
)

// Loaded records a run's first report (L7): whether its chain can resume,
// the settings in force and the orphaned plug state.
func (s *Store) Loaded(id string, l session.Loaded) error {
	_, err := s.UpdateSession(id, func(r *session.Record) error {
		r.Resumable, r.Settings, r.OrphanedState = l.Resumable, l.Settings, l.OrphanedState
		return nil
	})
	return err
}

// Paused records a reported pause (L6, L7).
func (s *Store) Paused(id string, p session.PauseRecord) (*session.Record, error) {
	return s.UpdateSession(id, func(r *session.Record) error {
		session.ApplyPause(r, p)
		return nil
	})
}

// TornDown records a teardown's outcome: the session ends and its
// persisted state goes, or a retry is due (L2).
func (s *Store) TornDown(id string, failure error, at time.Time) (*session.Record, error) {
	rec, err := s.UpdateSession(id, func(r *session.Record) error {
		session.ApplyTeardown(r, failure, at)
		return nil
	})
	if err == nil && rec.State == session.Ended {
		err = s.DeletePersisted(id)
	}
	return rec, err
}
