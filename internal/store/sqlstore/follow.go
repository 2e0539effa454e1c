package sqlstore

import (
	"context"
	"fmt"
	"io"
)

// TranscriptAfter returns the lines of a session's transcript written after
// the chunk numbered after (0: from the start), each ended by a newline,
// and the number of the last chunk read, to pass again: a reader that
// follows a transcript as it grows asks for what is new. One run writes a
// session's transcript at a time, one chunk after the other, so no chunk
// numbered below the last one read commits later.
func (s *transcriptStore) TranscriptAfter(ctx context.Context, id string, after int64) (lines []byte, last int64, err error) {
	if err := checkSessionID(id); err != nil {
		return nil, after, err
	}
	if err := s.exists(ctx, id); err != nil {
		return nil, after, fmt.Errorf("transcript: %w", err)
	}
	if err := s.read.row(ctx, "SELECT COALESCE(MAX(seq), ?) FROM transcript_chunks WHERE session_id = ?", after, id).Scan(&last); err != nil {
		return nil, after, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	if last == after {
		return nil, after, nil
	}
	r, err := s.readChunks(ctx, id, after, last)
	if err != nil {
		return nil, after, err
	}
	defer r.Close()
	if lines, err = io.ReadAll(r); err != nil {
		return nil, after, err
	}
	return lines, last, nil
}

// TranscriptBytes is how many bytes of transcript lines this store has
// appended since it opened.
func (s *transcriptStore) TranscriptBytes() int64 { return s.written.Load() }
