package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/streamfile"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// NewSessionID returns a fresh random session id (lifecycle.NewID).
func (s *sessionFiles) NewSessionID() string { return lifecycle.NewID() }

// CreateSession stores a new session. Created (and Updated) are set to now
// when zero. It fails when the id is in use.
func (s *sessionFiles) CreateSession(ctx context.Context, rec *lifecycle.Record) error {
	if err := checkSessionID(rec.ID); err != nil {
		return err
	}
	now := s.now()
	if rec.Created.IsZero() {
		rec.Created = now
	}
	if rec.Updated.IsZero() {
		rec.Updated = rec.Created
	}
	return s.withLock(ctx, true, func() error {
		name := s.sessionPath(rec.ID)
		if _, err := os.Lstat(name); err == nil {
			return fmt.Errorf("session %s already exists", rec.ID)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("session %s: %w", rec.ID, err)
		}
		// A directory without session.json is what a process killed
		// while creating the session left; it is taken over.
		if err := mkdirDurable(s.sessionDir(rec.ID)); err != nil {
			return fmt.Errorf("session %s: %w", rec.ID, err)
		}
		return s.writeSession(rec)
	})
}

// Session returns the stored record of a session, or an error wrapping
// lifecycle.ErrNotFound.
func (s *sessionFiles) Session(ctx context.Context, id string) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *lifecycle.Record
	err := s.withLock(ctx, false, func() error {
		var err error
		rec, err = s.readSession(id)
		return err
	})
	return rec, err
}

// UpdateSession changes a session's record: under the exclusive lock it
// reads the record, calls f, sets Updated and writes the record. An error
// from f aborts the update, writing nothing. f must not call the Store: the
// lock is not reentrant.
func (s *sessionFiles) UpdateSession(ctx context.Context, id string, f func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *lifecycle.Record
	err := s.withLock(ctx, true, func() error {
		var err error
		if rec, err = s.readSession(id); err != nil {
			return err
		}
		if err := lifecycle.ApplyUpdate(rec, f, s.now()); err != nil {
			return err
		}
		return s.writeSession(rec)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Sessions returns every stored session, sorted by Created, then ID. A
// record that cannot be read does not hide the others: they are returned
// with a *lifecycle.BrokenError that names each broken one.
func (s *sessionFiles) Sessions(ctx context.Context) ([]*lifecycle.Record, error) {
	var recs []*lifecycle.Record
	var broken lifecycle.BrokenError
	err := s.withLock(ctx, false, func() error {
		dir := s.path(sessionsDir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("state directory %s: %w", s.dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			if !e.IsDir() || checkSessionID(name) != nil {
				broken.Records = append(broken.Records, lifecycle.BrokenRecord{Path: filepath.Join(dir, name),
					Err: fmt.Errorf("state directory %s: %s is not a session directory", s.dir, filepath.Join(dir, name))})
				continue
			}
			rec, err := s.readSession(name)
			if errors.Is(err, lifecycle.ErrNotFound) {
				continue // being created, or its creator was killed
			}
			if err != nil {
				broken.Records = append(broken.Records, lifecycle.BrokenRecord{ID: name, Path: s.sessionPath(name), Err: err})
				continue
			}
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b *lifecycle.Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(broken.Records) > 0 {
		return recs, &broken
	}
	return recs, nil
}

// DueSessions reads every record (lifecycle.DueIn): a state directory is a
// person's, whose sessions are few, and it keeps no index. Records that
// cannot be read are named in a *lifecycle.BrokenError, with the others' answer.
func (s *sessionFiles) DueSessions(ctx context.Context, now time.Time) ([]string, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	recs, err := s.Sessions(ctx)
	if broken := (*lifecycle.BrokenError)(nil); err != nil && !errors.As(err, &broken) {
		return nil, time.Time{}, err
	}
	ids, next := lifecycle.DueIn(recs, now)
	return ids, next, err
}

// TranscriptPath is the file of a session's transcript, in the session's
// directory (see CreateSession). It is "" for an
// invalid session id.
func (s *sessionFiles) TranscriptPath(id string) string {
	if checkSessionID(id) != nil {
		return ""
	}
	return s.path(sessionsDir, id, transcriptFile)
}

// Transcript opens a session's transcript for appending (0600: transcripts
// may hold what the agent saw), as a stream whose pages are dropped from
// the system's cache behind it (streamfile). An unknown session is an
// error wrapping lifecycle.ErrNotFound.
func (s *sessionFiles) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.TranscriptPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// No session directory: no such session, as the SQL stores say.
		return nil, fmt.Errorf("transcript: session %s: %w", id, lifecycle.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return streamfile.New(f), nil
}

// ReadTranscript opens a session's transcript for reading.
func (s *sessionFiles) ReadTranscript(ctx context.Context, id string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	f, err := os.Open(s.TranscriptPath(id))
	if err != nil {
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return f, nil
}

func (s *sessionFiles) readSession(id string) (*lifecycle.Record, error) {
	name := s.sessionPath(id)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	rec := new(lifecycle.Record)
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("session %s: state file %s is corrupt: %v", id, name, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("session %s: state file %s is corrupt: it is the record of session %q", id, name, rec.ID)
	}
	return rec, nil
}

// writeSession writes a session's record; the caller holds the exclusive
// lock and the session's directory exists.
func (s *sessionFiles) writeSession(rec *lifecycle.Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("session %s: %w", rec.ID, err)
	}
	data = append(data, '\n')
	dir := s.sessionDir(rec.ID)
	s.removeTemps(dir)
	if err := atomicfile.Write(filepath.Join(dir, sessionFile), data, 0o600, true); err != nil {
		return fmt.Errorf("session %s: %w", rec.ID, err)
	}
	return nil
}

// Discard removes a session that never ran a plug: its record and its
// files, as if it had never been. The caller holds its run lock.
func (s *sessionFiles) Discard(ctx context.Context, id string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	return s.withLock(ctx, true, func() error { return s.removeSession(id) })
}

// removeSession removes a session's directory; the caller holds the
// store's lock and the session's run lock. It is renamed to a hidden name
// first, which readers skip: the session vanishes at once, even if
// removing its files is cut short.
func (s *sessionFiles) removeSession(id string) error {
	gone := s.path(sessionsDir, "."+id+".tmp-gone")
	if err := os.Rename(s.sessionDir(id), gone); err != nil {
		return fmt.Errorf("session %s: removing it: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.path(sessionsDir)); err != nil {
		return fmt.Errorf("session %s: removing it: %w", id, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("session %s: removing %s: %w", id, gone, err)
	}
	return nil
}
