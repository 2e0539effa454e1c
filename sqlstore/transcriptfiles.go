package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/streamfile"
)

// A session's transcript lines are kept in a file of the transcript
// directory, as they were written, and the database keeps a row per
// chunk saying where its lines are. A database stores bytes at several
// times the CPU time a file written as a stream does (the pages of its
// log, then of its tables), and a transcript is most of what a server
// stores. The file is synced before the chunk's row is committed, so a
// committed row's lines are in the file; bytes past the last committed
// row (a crash between the two) are cut when the file is next opened for
// appending, and are never read.

// transcriptExt ends the name of a transcript file: SESSION-ID.jsonl.
const transcriptExt = ".jsonl"

// transcriptFiles are the open files of the sessions' transcripts, one
// per session, shared by its writers so that its lines and rows keep one
// order.
type transcriptFiles struct {
	dir   string
	mu    sync.Mutex
	files map[string]*sessionFile
}

// sessionFile is the open file of a session's transcript.
type sessionFile struct {
	id   string
	refs int // guarded by transcriptFiles.mu

	mu  sync.Mutex
	f   *os.File
	w   *streamfile.File
	end int64 // what the committed rows account for
	err error // once set, every append fails with it
}

func (t *transcriptFiles) path(id string) string {
	return filepath.Join(t.dir, id+transcriptExt)
}

// prepareTranscripts makes the transcript directory and removes the files of sessions the
// database does not hold: those of sessions discarded while their file
// could not be removed.
func (s *Store) prepareTranscripts(ctx context.Context) error {
	t := &s.transcripts
	if t.dir == "" {
		return errors.New("sqlstore: no transcript directory")
	}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return fmt.Errorf("transcript directory: %w", err)
	}
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return fmt.Errorf("transcript directory: %w", err)
	}
	known := map[string]bool{}
	rows, err := s.read.rows(ctx, "SELECT id FROM sessions")
	if err != nil {
		return fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("%s: listing sessions: %w", s.where, err)
		}
		known[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), transcriptExt)
		if ok && e.Type().IsRegular() && !known[id] {
			if err := os.Remove(filepath.Join(t.dir, e.Name())); err != nil {
				return fmt.Errorf("transcript directory: %w", err)
			}
		}
	}
	return nil
}

// acquire opens the file of session id's transcript for appending, or
// shares the one open; release gives it back.
func (s *Store) acquire(id string) (*sessionFile, error) {
	t := &s.transcripts
	t.mu.Lock()
	defer t.mu.Unlock()
	if sf := t.files[id]; sf != nil {
		sf.refs++
		return sf, nil
	}
	end, err := s.committedEnd(id)
	if err != nil {
		return nil, err
	}
	path := t.path(id)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	if err := cutToCommitted(f, end); err != nil {
		f.Close()
		return nil, fmt.Errorf("session %s: transcript %s: %w", id, path, err)
	}
	sf := &sessionFile{id: id, refs: 1, f: f, w: streamfile.New(f), end: end}
	if t.files == nil {
		t.files = map[string]*sessionFile{}
	}
	t.files[id] = sf
	return sf, nil
}

// cutToCommitted cuts what f holds past end, the bytes its rows account
// for; a file shorter than that lost lines, which is an error.
func cutToCommitted(f *os.File, end int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case st.Size() < end:
		return fmt.Errorf("the file has %d bytes, and the database's rows account for %d: lines are lost (was the file restored from an older backup than the database?)", st.Size(), end)
	case st.Size() > end:
		return f.Truncate(end)
	}
	return nil
}

// committedEnd is where the committed rows of session id's transcript end
// in its file.
func (s *Store) committedEnd(id string) (int64, error) {
	var end int64
	err := s.read.row(context.Background(), "SELECT COALESCE(MAX(file_offset + file_size), 0) FROM transcript_chunks WHERE session_id = ? AND file_offset >= 0", id).Scan(&end)
	if err != nil {
		return 0, fmt.Errorf("session %s: transcript: %s: %w", id, s.where, err)
	}
	return end, nil
}

func (s *Store) release(sf *sessionFile) {
	t := &s.transcripts
	t.mu.Lock()
	sf.refs--
	last := sf.refs == 0
	if last && t.files[sf.id] == sf {
		delete(t.files, sf.id)
	}
	t.mu.Unlock()
	if !last {
		return
	}
	// sf.mu is taken without t.mu held: append takes t.mu under sf.mu.
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.w.Close()
	if sf.err == nil {
		sf.err = fs.ErrClosed
	}
}

// forget takes a session's file out of use, failing its writers' later
// appends with err; the next writer opens the file again.
func (s *Store) forget(sf *sessionFile, err error) {
	t := &s.transcripts
	t.mu.Lock()
	if t.files[sf.id] == sf {
		delete(t.files, sf.id)
	}
	t.mu.Unlock()
	sf.err = err
}

// append appends lines, each ended by a newline, to the session's file
// and commits their row, with the run and call they are of. A failure
// leaves no row: the bytes it wrote are past the committed end.
func (s *Store) append(sf *sessionFile, lines []byte, run int, call uint64) error {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.err != nil {
		return fmt.Errorf("session %s: transcript: %w", sf.id, sf.err)
	}
	fail := func(err error) error {
		err = fmt.Errorf("session %s: transcript: %w", sf.id, err)
		s.forget(sf, err)
		return err
	}
	if _, err := sf.w.Write(lines); err != nil {
		return fail(err)
	}
	if err := sf.f.Sync(); err != nil {
		return fail(err)
	}
	_, err := s.writer().exec(context.Background(), "INSERT INTO transcript_chunks (session_id, lines, run, last_call, file_offset, file_size) VALUES (?, ?, ?, ?, ?, ?)",
		sf.id, []byte{}, run, int64(call), sf.end, len(lines))
	if err != nil {
		return fail(fmt.Errorf("%s: %w", s.where, err))
	}
	sf.end += int64(len(lines))
	return nil
}

// removeTranscript removes the file of a discarded session; its writers'
// later appends fail.
func (s *Store) removeTranscript(id string) error {
	t := &s.transcripts
	t.mu.Lock()
	sf := t.files[id]
	t.mu.Unlock()
	if sf != nil {
		sf.mu.Lock()
		s.forget(sf, fmt.Errorf("session %s was discarded", id))
		sf.mu.Unlock()
	}
	if err := os.Remove(t.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session %s: removing its transcript: %w", id, err)
	}
	return nil
}
