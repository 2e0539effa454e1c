package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/session"
)

func checkSessionID(id string) error { return session.CheckID("session id", id) }

func notFound(id string) error { return fmt.Errorf("session %s: %w", id, session.ErrNotFound) }

// NewSessionID returns a fresh random id (session.NewID); at 60 bits, a
// collision is left to CreateSession to refuse.
func (s *Store) NewSessionID() string { return session.NewID() }

// CreateSession stores a new session. Created (and Updated) are set to now
// when zero. It fails, wrapping ErrExists, when the id is in use.
func (s *Store) CreateSession(rec *session.Record) error {
	if err := checkSessionID(rec.ID); err != nil {
		return err
	}
	if rec.Created.IsZero() {
		rec.Created = s.now()
	}
	if rec.Updated.IsZero() {
		rec.Updated = rec.Created
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("session %s: %w", rec.ID, err)
	}
	n, err := affected(s.writer().exec(context.Background(),
		"INSERT INTO sessions (id, agent_name, state, runs, created, updated, record) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
		rec.ID, rec.AgentName, string(rec.State), rec.Runs, rec.Created.UnixNano(), rec.Updated.UnixNano(), string(data)))
	if err != nil {
		return fmt.Errorf("session %s: %s: %w", rec.ID, s.where, err)
	}
	if n == 0 {
		return fmt.Errorf("session %s %w", rec.ID, ErrExists)
	}
	return nil
}

// Session returns a session's record, or an error wrapping
// session.ErrNotFound.
func (s *Store) Session(id string) (*session.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	return s.readSession(context.Background(), s.read, id, "")
}

// readSession reads and decodes a session's record; lock is appended to
// the query (the dialect's FOR UPDATE, in a transaction).
func (s *Store) readSession(ctx context.Context, c conn, id, lock string) (*session.Record, error) {
	var data string
	err := c.row(ctx, "SELECT record FROM sessions WHERE id = ?"+lock, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %s: %w", id, s.where, err)
	}
	return decodeRecord(id, data)
}

// decodeRecord decodes a stored record, refusing one that is not the
// record of id.
func decodeRecord(id, data string) (*session.Record, error) {
	rec := new(session.Record)
	if err := json.Unmarshal([]byte(data), rec); err != nil {
		return nil, fmt.Errorf("session %s: its stored record is corrupt: %v", id, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("session %s: its stored record is corrupt: it is the record of session %q", id, rec.ID)
	}
	return rec, nil
}

// UpdateSession changes a session's record in a transaction that holds it
// (FOR UPDATE on PostgreSQL; SQLite's one writer): it reads the record,
// calls f, sets Updated and writes the record. An error from f writes
// nothing. f must not call the Store.
func (s *Store) UpdateSession(id string, f func(*session.Record) error) (*session.Record, error) {
	return s.updateSession(context.Background(), id, f, nil)
}

// updateSession is UpdateSession, with after run in the same transaction
// once the record is written.
func (s *Store) updateSession(ctx context.Context, id string, f func(*session.Record) error, after func(conn, *session.Record) error) (*session.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *session.Record
	err := s.inTx(ctx, func(c conn) error {
		var err error
		if rec, err = s.readSession(ctx, c, id, s.d.forUpdate); err != nil {
			return err
		}
		if err := session.ApplyUpdate(rec, f, s.now()); err != nil {
			return err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		if _, err := c.exec(ctx, "UPDATE sessions SET agent_name = ?, state = ?, runs = ?, created = ?, updated = ?, record = ? WHERE id = ?",
			rec.AgentName, string(rec.State), rec.Runs, rec.Created.UnixNano(), rec.Updated.UnixNano(), string(data), id); err != nil {
			return fmt.Errorf("session %s: %s: %w", id, s.where, err)
		}
		if after != nil {
			return after(c, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Sessions returns every session, sorted by Created, then ID. Records that
// cannot be decoded do not hide the others: they are returned with a
// *blaise.BrokenError naming each broken one, as the file store does.
func (s *Store) Sessions() ([]*session.Record, error) {
	ctx := context.Background()
	rows, err := s.read.rows(ctx, "SELECT id, record FROM sessions ORDER BY created, id")
	if err != nil {
		return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	defer rows.Close()
	var recs []*session.Record
	var broken blaise.BrokenError
	for rows.Next() {
		var id, data string
		if err := rows.Scan(&id, &data); err != nil {
			return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
		}
		rec, err := decodeRecord(id, data)
		if err != nil {
			broken.Records = append(broken.Records, blaise.BrokenRecord{ID: id, Err: err})
			continue
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	if len(broken.Records) > 0 {
		return recs, &broken
	}
	return recs, nil
}

// CurrentRun returns the number of a session's latest run and its state:
// the server fences a run's writes with it (a run the server has failed or
// replaced writes no more).
func (s *Store) CurrentRun(id string) (run int, state session.State, err error) {
	if err := checkSessionID(id); err != nil {
		return 0, "", err
	}
	var st string
	err = s.read.row(context.Background(), "SELECT runs, state FROM sessions WHERE id = ?", id).Scan(&run, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", notFound(id)
	}
	if err != nil {
		return 0, "", fmt.Errorf("session %s: %s: %w", id, s.where, err)
	}
	return run, session.State(st), nil
}

// Discard removes a session with all it stored: its record, persisted
// state and transcript's chunks (the schema's cascade), then its
// transcript's file; a file left by a failure is removed at a later
// start's first append.
func (s *Store) Discard(id string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if _, err := s.writer().exec(context.Background(), "DELETE FROM sessions WHERE id = ?", id); err != nil {
		return fmt.Errorf("session %s: removing it: %s: %w", id, s.where, err)
	}
	return s.removeTranscript(id)
}

// Loaded records a run's first report (session.RecordLoaded).
func (s *Store) Loaded(id string, l session.Loaded) error { return session.RecordLoaded(s, id, l) }

// Paused records a reported pause (session.RecordPaused).
func (s *Store) Paused(id string, p session.PauseRecord) (*session.Record, error) {
	return session.RecordPaused(s, id, p)
}

// TornDown records a teardown's outcome: the session ends and, in the same
// transaction, its persisted state goes; or a retry is due (L2).
func (s *Store) TornDown(id string, failure error, at time.Time) (*session.Record, error) {
	return s.updateSession(context.Background(), id, func(r *session.Record) error {
		session.ApplyTeardown(r, failure, at)
		return nil
	}, func(c conn, r *session.Record) error {
		if r.State != session.Ended {
			return nil
		}
		return s.deletePersisted(context.Background(), c, id)
	})
}
