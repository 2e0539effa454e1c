package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

func checkPlugID(id string) error { return lifecycle.CheckID("plug id", id) }

func checkIDs(sessionID, plugID string) error {
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	return checkPlugID(plugID)
}

// Persisted is the sessions' persisted plug state, sealed (AES-256-GCM,
// bound to its session and plug id) in the persisted table.
func (s *persistedStore) Persisted() lifecycle.Persisted { return persisted{s} }

type persisted struct{ s *persistedStore }

// Get returns the value of a plug's persisted state; ok is false when there
// is none. A value that does not decrypt (another key, or damage) is an
// error naming the session and plug.
func (p persisted) Get(ctx context.Context, sessionID, plugID string) ([]byte, bool, error) {
	if err := checkIDs(sessionID, plugID); err != nil {
		return nil, false, err
	}
	var data []byte
	err := p.s.read.row(ctx, "SELECT sealed FROM persisted WHERE session_id = ? AND plug_id = ?", sessionID, plugID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("persisted state of plug %s in session %s: %s: %w", plugID, sessionID, p.s.where, err)
	}
	value, err := p.s.box.Open(sessionID, plugID, data)
	if err != nil {
		return nil, false, fmt.Errorf("persisted state of plug %s in session %s in %s: %w", plugID, sessionID, p.s.where, err)
	}
	return value, true, nil
}

// Set stores a plug's persisted state, data being its JSON, and returns
// once it is committed. The session must exist.
func (p persisted) Set(ctx context.Context, sessionID, plugID, plugName string, data []byte) error {
	if err := checkIDs(sessionID, plugID); err != nil {
		return err
	}
	if !json.Valid(data) {
		return fmt.Errorf("persisted state of plug %s in session %s: the value is not JSON", plugID, sessionID)
	}
	sealed := p.s.box.Seal(sessionID, plugID, data)
	// In a transaction, never alone: a statement that waits for a lock
	// when ctx ends would still run once it gets it, after Set has said
	// it failed; a transaction whose client is gone never commits.
	return p.s.inTx(ctx, func(c conn) error {
		// SQLite needs the WHERE to parse the upsert.
		n, err := affected(c.exec(ctx, `INSERT INTO persisted (session_id, plug_id, plug_name, sealed)
			SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)
			ON CONFLICT (session_id, plug_id) DO UPDATE SET plug_name = excluded.plug_name, sealed = excluded.sealed`,
			sessionID, plugID, plugName, sealed, sessionID))
		if err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %s: %w", plugID, sessionID, p.s.where, err)
		}
		if n == 0 {
			return fmt.Errorf("persisted state of plug %s: %w", plugID, notFound(sessionID))
		}
		return nil
	})
}

// Delete removes a plug's persisted state; there being none is no error.
func (p persisted) Delete(ctx context.Context, sessionID, plugID string) error {
	if err := checkIDs(sessionID, plugID); err != nil {
		return err
	}
	// In a transaction, as Set.
	return p.s.inTx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, "DELETE FROM persisted WHERE session_id = ? AND plug_id = ?", sessionID, plugID); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %s: %w", plugID, sessionID, p.s.where, err)
		}
		return nil
	})
}

// PersistedIDs returns the ids of the plugs with persisted state in a
// session, sorted.
func (s *persistedStore) PersistedIDs(ctx context.Context, sessionID string) ([]string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return nil, err
	}
	rows, err := s.read.rows(ctx, "SELECT plug_id FROM persisted WHERE session_id = ? ORDER BY plug_id", sessionID)
	if err != nil {
		return nil, fmt.Errorf("persisted state of session %s: %s: %w", sessionID, s.where, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("persisted state of session %s: %s: %w", sessionID, s.where, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("persisted state of session %s: %s: %w", sessionID, s.where, err)
	}
	return ids, nil
}

// PersistedPlug returns the name of the plug that stored a plug id's
// persisted state in a session; ok is false when there is no such state.
func (s *persistedStore) PersistedPlug(ctx context.Context, sessionID, plugID string) (name string, ok bool, err error) {
	if err := checkIDs(sessionID, plugID); err != nil {
		return "", false, err
	}
	err = s.read.row(ctx, "SELECT plug_name FROM persisted WHERE session_id = ? AND plug_id = ?", sessionID, plugID).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("persisted state of plug %s in session %s: %s: %w", plugID, sessionID, s.where, err)
	}
	return name, true, nil
}

// DeletePersisted removes all of a session's persisted state.
func (s *persistedStore) DeletePersisted(ctx context.Context, sessionID string) error {
	if err := checkSessionID(sessionID); err != nil {
		return err
	}
	return s.deletePersisted(ctx, s.writer(), sessionID)
}

func (s *persistedStore) deletePersisted(ctx context.Context, c conn, sessionID string) error {
	if _, err := c.exec(ctx, "DELETE FROM persisted WHERE session_id = ?", sessionID); err != nil {
		return fmt.Errorf("persisted state of session %s: %s: %w", sessionID, s.where, err)
	}
	return nil
}
