package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

var _ lifecycle.PlugLogs = (*Store)(nil)

// AppendPlugLog stores lines of the session's plug log in one
// transaction; a line it holds already is kept as it was. The session
// must exist.
func (s *sessionStore) AppendPlugLog(ctx context.Context, id string, lines []lifecycle.PlugLogLine) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	return s.inTx(ctx, func(c conn) error {
		for i := range lines {
			l := &lines[i]
			if l.Seq < 1 || l.Seq > lifecycle.MaxPlugLogLines+1 {
				return fmt.Errorf("session %s: plug log: line %d of run %d: a run keeps lines 1 to %d", id, l.Seq, l.Run, lifecycle.MaxPlugLogLines+1)
			}
			data, err := json.Marshal(l)
			if err != nil {
				return fmt.Errorf("session %s: plug log: %w", id, err)
			}
			n, err := affected(c.exec(ctx, `INSERT INTO plug_logs (session_id, run, seq, line)
				SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)
				ON CONFLICT (session_id, run, seq) DO NOTHING`, id, l.Run, l.Seq, string(data), id))
			if err != nil {
				return fmt.Errorf("session %s: plug log: %s: %w", id, s.where, err)
			}
			if n == 0 && i == 0 {
				if _, err := s.readSession(ctx, c, id, ""); err != nil {
					return fmt.Errorf("plug log: %w", err)
				}
			}
		}
		return nil
	})
}

// PlugLog returns the session's plug log, by run, then seq.
func (s *sessionStore) PlugLog(ctx context.Context, id string) ([]lifecycle.PlugLogLine, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	rows, err := s.read.rows(ctx, "SELECT line FROM plug_logs WHERE session_id = ? ORDER BY run, seq", id)
	if err != nil {
		return nil, fmt.Errorf("session %s: plug log: %s: %w", id, s.where, err)
	}
	defer rows.Close()
	var lines []lifecycle.PlugLogLine
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("session %s: plug log: %s: %w", id, s.where, err)
		}
		var l lifecycle.PlugLogLine
		if err := json.Unmarshal([]byte(data), &l); err != nil {
			return nil, fmt.Errorf("session %s: plug log: a stored line is corrupt: %v", id, err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session %s: plug log: %s: %w", id, s.where, err)
	}
	return lines, nil
}
