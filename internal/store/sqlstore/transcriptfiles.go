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

	"github.com/blaiseagent/blaise-agent/internal/store/streamfile"
	"github.com/gofrs/flock"
)

// A session's transcript lines are kept in a file of the transcript
// directory, as they were written, and the database keeps a row per
// chunk saying where its lines are. A database stores bytes at several
// times the CPU time a file written as a stream does (the pages of its
// log, then of its tables), and a transcript is most of what a server
// stores. The file is synced before the chunk's row is committed, so a
// committed row's lines are in the file; bytes past the last committed
// row (a failed append, a crash between the two) are cut, and are never
// read.

// transcriptExt ends the name of a transcript file: SESSION-ID.jsonl.
// lockName is the file whose lock the store that appends holds: two
// stores appending to one directory would each count its files' bytes
// as its own.
const (
	transcriptExt = ".jsonl"
	lockName      = ".lock"
)

// transcriptFiles are the open files of the sessions' transcripts, one
// per session, shared by its writers so that its lines and rows keep one
// order.
type transcriptFiles struct {
	dir string

	mu     sync.Mutex
	lock   *flock.Flock // held once the store appends
	closed bool
	files  map[string]*sessionFile
}

// sessionFile is the open file of a session's transcript.
type sessionFile struct {
	id   string
	refs int // guarded by transcriptFiles.mu

	mu     sync.Mutex
	f      *os.File
	w      *streamfile.File
	end    int64 // what the committed rows account for
	err    error // once set, every append fails with it
	closed bool
}

func (t *transcriptFiles) path(id string) string {
	return filepath.Join(t.dir, id+transcriptExt)
}

// lockTranscripts makes the transcript directory, takes its lock, and
// removes the files of sessions the database does not hold (those of
// sessions discarded while their file could not be removed), before the
// store's first append; t.mu is held. A store that only reads (the
// tokens commands) never does: the directory is the appending server's.
func (s *transcriptStore) lockTranscripts(ctx context.Context) error {
	t := &s.transcripts
	switch {
	case t.closed:
		return errors.New("the store is closed")
	case t.lock != nil:
		return nil
	}
	err := func() error {
		if t.dir == "" {
			return errors.New("no transcript directory")
		}
		if err := os.MkdirAll(t.dir, 0o700); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(t.dir)); err != nil {
			return err
		}
		lock := flock.New(filepath.Join(t.dir, lockName))
		locked, err := lock.TryLock()
		if err != nil {
			return err
		}
		if !locked {
			return fmt.Errorf("another store appends to it (it holds %s): a database has one server", lock.Path())
		}
		t.lock = lock
		s.removeOrphans(ctx)
		return nil
	}()
	if err != nil {
		return fmt.Errorf("transcript directory %s: %w", t.dir, err)
	}
	return nil
}

// Claim takes the lock of the transcript directory now, as a server does
// at its start: a second server on the same store is refused there, not
// at its first append.
func (s *transcriptStore) Claim(ctx context.Context) error {
	s.transcripts.mu.Lock()
	defer s.transcripts.mu.Unlock()
	return s.lockTranscripts(ctx)
}

// removeOrphans removes the files of sessions the database does not
// hold. It is a cleanup: a file it cannot remove, or a database it cannot
// read, is left for the next start.
func (s *transcriptStore) removeOrphans(ctx context.Context) {
	entries, err := os.ReadDir(s.transcripts.dir)
	if err != nil {
		return
	}
	known := map[string]bool{}
	rows, err := s.read.rows(ctx, "SELECT id FROM sessions")
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if rows.Scan(&id) != nil {
			return
		}
		known[id] = true
	}
	if rows.Err() != nil {
		return
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), transcriptExt); ok && e.Type().IsRegular() && !known[id] {
			_ = os.Remove(filepath.Join(s.transcripts.dir, e.Name()))
		}
	}
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// acquire opens the file of session id's transcript for appending, or
// shares the one open; release gives it back. The file is opened under
// its own lock, not the registry's: the session's other writers wait for
// it in append, and other sessions' writers do not wait at all.
func (s *transcriptStore) acquire(ctx context.Context, id string) (*sessionFile, error) {
	t := &s.transcripts
	t.mu.Lock()
	if err := s.lockTranscripts(ctx); err != nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	if sf := t.files[id]; sf != nil {
		sf.refs++
		t.mu.Unlock()
		// Its open may be under way: it holds sf.mu until it is done.
		sf.mu.Lock()
		failed := sf.w == nil
		err := sf.err
		sf.mu.Unlock()
		if failed {
			t.mu.Lock()
			sf.refs--
			t.mu.Unlock()
			return nil, fmt.Errorf("session %s: transcript: %w", id, err)
		}
		return sf, nil
	}
	sf := &sessionFile{id: id, refs: 1}
	sf.mu.Lock() // a new lock: nobody else can hold it
	if t.files == nil {
		t.files = map[string]*sessionFile{}
	}
	t.files[id] = sf
	t.mu.Unlock()
	defer sf.mu.Unlock()
	err := func() error {
		end, err := s.committedEnd(ctx, id)
		if err != nil {
			return err
		}
		f, err := openFile(t.path(id), end)
		if err != nil {
			return fmt.Errorf("%s: %w", t.path(id), err)
		}
		sf.f, sf.w, sf.end = f, streamfile.New(f), end
		return nil
	}()
	if err != nil {
		// The writers that shared sf meanwhile are told err by acquire;
		// the next one to come opens the file again.
		sf.err, sf.closed = err, true
		s.forget(sf)
		t.mu.Lock()
		sf.refs--
		t.mu.Unlock()
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return sf, nil
}

// openFile is openTranscriptFile; tests replace it.
var openFile = openTranscriptFile

// openTranscriptFile opens a transcript file for appending, made (with a
// durable entry) if it is not there, and cut to end, the bytes its rows
// account for; a file shorter than that lost lines, which is an error.
func openTranscriptFile(path string, end int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err == nil {
		err = syncDir(filepath.Dir(path))
	} else if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case st.Size() < end:
		err = fmt.Errorf("the file has %d bytes, and the database's rows account for %d: lines are lost (was the file restored from an older backup than the database?)", st.Size(), end)
	case st.Size() > end:
		err = f.Truncate(end)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// committedEnd is where the committed rows of session id's transcript end
// in its file.
func (s *transcriptStore) committedEnd(ctx context.Context, id string) (int64, error) {
	var end int64
	err := s.read.row(ctx, "SELECT COALESCE(MAX(file_offset + file_size), 0) FROM transcript_chunks WHERE session_id = ? AND file_offset >= 0", id).Scan(&end)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.where, err)
	}
	return end, nil
}

func (s *transcriptStore) release(sf *sessionFile) {
	t := &s.transcripts
	t.mu.Lock()
	sf.refs--
	last := sf.refs == 0
	if last && t.files[sf.id] == sf {
		delete(t.files, sf.id)
	}
	t.mu.Unlock()
	if last {
		// sf.mu is taken without t.mu held: append takes t.mu under sf.mu.
		sf.close()
	}
}

// close closes the file; later appends fail.
func (sf *sessionFile) close() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.closed {
		return
	}
	sf.w.Close()
	sf.closed = true
	if sf.err == nil {
		sf.err = fs.ErrClosed
	}
}

// forget takes a session's file out of the registry: the next writer
// opens the file again, and cuts it to its committed rows.
func (s *transcriptStore) forget(sf *sessionFile) {
	t := &s.transcripts
	t.mu.Lock()
	if t.files[sf.id] == sf {
		delete(t.files, sf.id)
	}
	t.mu.Unlock()
}

// append appends lines, each ended by a newline, to the session's file
// and commits their row, with the run and call they are of. A failure
// cuts what it wrote, unless the rows say that it committed after all:
// the session's writers go on after the committed lines.
func (s *transcriptStore) append(ctx context.Context, sf *sessionFile, lines []byte, run int, call uint64) error {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.err != nil {
		return fmt.Errorf("session %s: transcript: %w", sf.id, sf.err)
	}
	inserting := false
	err := func() error {
		if _, err := sf.w.Write(lines); err != nil {
			return err
		}
		if err := sf.f.Sync(); err != nil {
			return err
		}
		inserting = true
		_, err := s.writer().exec(ctx, "INSERT INTO transcript_chunks (session_id, lines, run, last_call, file_offset, file_size) VALUES (?, ?, ?, ?, ?, ?)",
			sf.id, []byte{}, run, int64(call), sf.end, len(lines))
		if err != nil {
			return fmt.Errorf("%s: %w", s.where, err)
		}
		return nil
	}()
	if err == nil {
		sf.end += int64(len(lines))
		s.written.Add(int64(len(lines)))
		return nil
	}
	cut := sf.end
	if inserting {
		// A commit may fail to say that it went through (a connection
		// lost at the commit): the rows tell.
		switch end, qerr := s.committedEnd(ctx, sf.id); {
		case qerr == nil && end == sf.end+int64(len(lines)):
			sf.end = end
			return nil
		case qerr != nil || end != sf.end:
			cut = -1
		}
	}
	if cut < 0 || sf.w.Truncate(cut) != nil {
		// What the file holds past its rows is unknown: it is cut when
		// the session's next writer opens it.
		sf.err = fmt.Errorf("%w, and what the file holds past its committed lines is unknown", err)
		s.forget(sf)
	}
	return fmt.Errorf("session %s: transcript: %w", sf.id, err)
}

// removeTranscript removes the file of a discarded session; its writers'
// later appends fail.
func (s *transcriptStore) removeTranscript(id string) error {
	t := &s.transcripts
	t.mu.Lock()
	sf := t.files[id]
	if sf != nil {
		delete(t.files, id)
	}
	t.mu.Unlock()
	if sf != nil {
		sf.mu.Lock()
		if sf.err == nil {
			sf.err = errors.New("the session was discarded")
		}
		sf.mu.Unlock()
	}
	if err := os.Remove(t.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session %s: removing its transcript: %w", id, err)
	}
	return nil
}

// closeTranscripts closes the files open and gives up the directory's
// lock.
func (s *transcriptStore) closeTranscripts() error {
	t := &s.transcripts
	t.mu.Lock()
	files := t.files
	t.files = nil
	lock := t.lock
	t.lock, t.closed = nil, true
	t.mu.Unlock()
	for _, sf := range files {
		sf.close()
	}
	if lock != nil {
		return lock.Unlock()
	}
	return nil
}
