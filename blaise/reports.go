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

// Loaded records a run's first report (session.RecordLoaded).
func (s *Store) Loaded(id string, l session.Loaded) error { return session.RecordLoaded(s, id, l) }

// Paused records a reported pause (session.RecordPaused).
func (s *Store) Paused(id string, p session.PauseRecord) (*session.Record, error) {
	return session.RecordPaused(s, id, p)
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
