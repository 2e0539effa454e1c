package sqlstore

import (
	"context"
	"fmt"
)

// TranscriptAfter returns the lines of a session's transcript written after
// the chunk numbered after (0: from the start), each ended by a newline,
// and the number of the last chunk read, to pass again: a reader that
// follows a transcript as it grows asks for what is new.
func (s *Store) TranscriptAfter(id string, after int64) (lines []byte, last int64, err error) {
	if err := checkSessionID(id); err != nil {
		return nil, after, err
	}
	if err := s.exists(id); err != nil {
		return nil, after, fmt.Errorf("transcript: %w", err)
	}
	rows, err := s.read.rows(context.Background(), "SELECT seq, lines FROM transcript_chunks WHERE session_id = ? AND seq > ? ORDER BY seq", id, after)
	if err != nil {
		return nil, after, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	defer rows.Close()
	last = after
	for rows.Next() {
		var chunk []byte
		if err := rows.Scan(&last, &chunk); err != nil {
			return nil, after, fmt.Errorf("session %s: transcript: %w", id, err)
		}
		lines = append(lines, chunk...)
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return lines, last, nil
}
