package sqlstore

import (
	"context"
	"fmt"
)

// A transcript's chunks are numbered in the order they were written, and
// a chunk's number is a reader's cursor: one run writes a session's
// transcript at a time, one chunk after the other, so no chunk numbered
// below the last one read commits later. Numbers are the store's, not the
// session's: they grow, with gaps.

// TranscriptLast is the number of a session's last chunk (0: none yet):
// what a reader that follows the transcript polls.
func (s *transcriptStore) TranscriptLast(ctx context.Context, id string) (int64, error) {
	if err := checkSessionID(id); err != nil {
		return 0, err
	}
	if err := s.exists(ctx, id); err != nil {
		return 0, fmt.Errorf("transcript: %w", err)
	}
	var last int64
	if err := s.read.row(ctx, "SELECT COALESCE(MAX(seq), 0) FROM transcript_chunks WHERE session_id = ?", id).Scan(&last); err != nil {
		return 0, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	return last, nil
}

// TranscriptChunks streams the lines of a session's chunks numbered after
// after, up to to, each line ended by a newline: nothing of them is held
// but what a Read returns.
func (s *transcriptStore) TranscriptChunks(ctx context.Context, id string, after, to int64) (*ChunkReader, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	if err := s.exists(ctx, id); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return s.readChunks(ctx, id, after, to)
}

// TranscriptWindow is where the latest lines of a session's transcript up
// to the chunk numbered to start, to show them a window at a time: the
// number of the chunk before the window (0: the window starts at the
// transcript's start). The window holds at most maxBytes of stored lines
// (a deflated chunk counts as its deflated size), or one chunk when that
// one is larger. run is the run that wrote the chunk before the window (0:
// none, or a chunk written before chunks kept their run), which the
// window's records continue unless they start a run.
func (s *transcriptStore) TranscriptWindow(ctx context.Context, id string, to, maxBytes int64) (after int64, run int, err error) {
	if err := checkSessionID(id); err != nil {
		return 0, 0, err
	}
	if err := s.exists(ctx, id); err != nil {
		return 0, 0, fmt.Errorf("transcript: %w", err)
	}
	rows, err := s.read.rows(ctx, "SELECT seq, run, CASE WHEN file_offset < 0 THEN length(lines) ELSE file_size END FROM transcript_chunks WHERE session_id = ? AND seq <= ? ORDER BY seq DESC", id, to)
	if err != nil {
		return 0, 0, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	defer rows.Close()
	var sum int64
	first := true
	for rows.Next() {
		var seq, size int64
		if err := rows.Scan(&seq, &run, &size); err != nil {
			return 0, 0, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
		}
		if sum += size; sum > maxBytes && !first {
			return seq, run, nil
		}
		first = false
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	return 0, 0, nil
}

// TranscriptBytes is how many bytes of transcript lines this store has
// appended since it opened.
func (s *transcriptStore) TranscriptBytes() int64 { return s.written.Load() }
