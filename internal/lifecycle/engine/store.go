package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
	"github.com/blaiseagent/blaise-agent/internal/store/streamfile"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
)

// Layout of a state directory (the embedded control plane, docs/sessions.md#the-state-directory):
//
//	<dir>/version                              the store format version ("1\n")
//	<dir>/key                                  32 random bytes, 0600: the AES-256 key of persisted state
//	<dir>/lock                                 flock'ed: shared to read, exclusive to write
//	<dir>/sessions/<id>/session.json           the SessionRecord, JSON
//	<dir>/sessions/<id>/persisted/<plugid>.bin a plug's persisted state, encrypted
//	<dir>/sessions/<id>/transcript.jsonl       the session's transcript
//
// Every write takes the exclusive lock, writes a temporary file beside its
// target, syncs it, renames it over the target and syncs the directory, so a
// reader (or a process killed mid-write) sees the old content or the new, never
// a mix. Temporary files are named ".<target>.tmp-<random>"; readers skip
// names that begin with a dot, and writers remove the ones a killed process
// left behind.
//
// A persisted state file is sealed (package sealed: AES-256-GCM, bound to
// "<session>/<plugid>", so a file copied to another session or plug does
// not decrypt). The plaintext is the JSON object
// {"plug": <plug name>, "value": <the value's JSON>}.

// StoreVersion is the format version of a state directory.
const StoreVersion = 1

const (
	versionFile    = "version"
	keyFile        = "key"
	lockFile       = "lock"
	sessionsDir    = "sessions"
	sessionFile    = "session.json"
	persistedDir   = "persisted"
	persistedExt   = ".bin"
	transcriptFile = "transcript.jsonl"

	keySize = sealed.KeySize
	// lockRetry is how often a lock wait that honours a context tries again.
	lockRetry = 5 * time.Millisecond
)

// ErrNotFound is returned, wrapped with the session id, for a session the
// store does not hold: session.ErrNotFound, which every store returns.
var ErrNotFound = lifecycle.ErrNotFound

func checkSessionID(id string) error { return lifecycle.CheckID("session id", id) }

func checkPlugID(id string) error { return lifecycle.CheckID("plug id", id) }

// DefaultStateDir is $XDG_STATE_HOME/blaise-agent, else
// ~/.local/state/blaise-agent. It is "" when neither XDG_STATE_HOME (an
// absolute path) nor the home directory is known.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "blaise-agent")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "blaise-agent")
}

// Store keeps sessions, their persisted plug state and transcripts in a
// state directory. Several goroutines and processes may use one directory at
// once: each operation takes its own flock on the lock file.
type Store struct {
	dir string
	box *sealed.Box
	// Clock dates records; nil: the machine's.
	Clock lifecycle.Clock
}

func (s *Store) now() time.Time {
	var c lifecycle.Clock = lifecycle.RealClock{}
	if s.Clock != nil {
		c = s.Clock
	}
	return c.Now().UTC()
}

// OpenStore opens the state directory dir, creating it (0700), its version
// file and its key file as needed. It refuses a directory of another format
// version, a directory holding files of something else, and a key file of the
// wrong size or readable by others.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("no state directory: set XDG_STATE_HOME or HOME")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s := &Store{dir: dir}

	// Check before taking the lock, which would leave a lock file behind
	// in somebody else's directory.
	if _, err := s.readVersion(); errors.Is(err, fs.ErrNotExist) {
		if err := s.checkEmpty(); err != nil {
			// Another opener may have made the store since we looked.
			if _, verr := s.readVersion(); verr != nil {
				return nil, err
			}
		}
	} else if err != nil {
		return nil, err
	}

	var key []byte
	err = s.withLock(true, func() error {
		if _, err := s.readVersion(); errors.Is(err, fs.ErrNotExist) {
			if err := s.checkEmpty(); err != nil {
				return err
			}
			s.removeTemps(dir)
			data := []byte(strconv.Itoa(StoreVersion) + "\n")
			if err := atomicfile.Write(filepath.Join(dir, versionFile), data, 0o600, true); err != nil {
				return fmt.Errorf("state directory %s: %w", dir, err)
			}
		} else if err != nil {
			return err
		}
		if key, err = LoadKeyFile(s.path(keyFile)); err != nil {
			return err
		}
		return mkdirDurable(filepath.Join(dir, sessionsDir))
	})
	if err != nil {
		return nil, err
	}
	if s.box, err = sealed.New(key); err != nil {
		return nil, fmt.Errorf("key file %s: %w", s.path(keyFile), err)
	}
	return s, nil
}

// StoreExists reports whether dir holds a state directory, without creating
// anything: it is false for a directory that does not exist or holds
// nothing of a store. A directory that holds other files is reported as
// existing, so that OpenStore names them.
func StoreExists(dir string) (bool, error) {
	if dir == "" {
		return false, errors.New("no state directory: set XDG_STATE_HOME or HOME")
	}
	s := &Store{dir: dir}
	_, err := s.readVersion()
	if !errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	err = s.checkEmpty()
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err != nil, nil
}

// Dir is the state directory, an absolute path.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir}, elem...)...)
}

func (s *Store) sessionDir(id string) string { return s.path(sessionsDir, id) }

func (s *Store) sessionPath(id string) string { return s.path(sessionsDir, id, sessionFile) }

func (s *Store) persistedPath(session, plugID string) string {
	return s.path(sessionsDir, session, persistedDir, plugID+persistedExt)
}

// readVersion reads the version file; its error wraps fs.ErrNotExist when
// there is none.
func (s *Store) readVersion() (int, error) {
	name := s.path(versionFile)
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("state directory %s: %w", s.dir, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("state directory %s: %w", s.dir, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("state directory %s: %s is not a blaise-agent version file (want a number, got %q)", s.dir, name, data)
	}
	if v != StoreVersion {
		return 0, fmt.Errorf("state directory %s: %s says format version %d; this blaise-agent reads version %d", s.dir, name, v, StoreVersion)
	}
	return v, nil
}

// checkEmpty refuses to make a state directory of a directory that holds
// files other than the store's lock file (and hidden ones).
func (s *Store) checkEmpty() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	for _, e := range entries {
		if e.Name() == lockFile || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		return fmt.Errorf("state directory %s has no %s file but holds %s: it is not a blaise-agent state directory", s.dir, versionFile, filepath.Join(s.dir, e.Name()))
	}
	return nil
}

// LoadKeyFile reads the 32-byte AES-256 key file name (0600), creating it
// with a random key if there is none. The key is published with a hard
// link, which like O_EXCL fails when the file exists, so two creators agree
// on one key even without a lock, and a crash never leaves a short key file.
func LoadKeyFile(name string) ([]byte, error) {
	key, err := readKey(name)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(name)
	key = make([]byte, keySize)
	rand.Read(key)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*") // O_EXCL, 0600
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	err = os.Link(tmp.Name(), name)
	if errors.Is(err, fs.ErrExist) {
		return readKey(name)
	}
	if err != nil {
		// A file system without hard links: create it with O_EXCL.
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return readKey(name)
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", name, err)
		}
		_, err = f.Write(key)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", name, err)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	return key, nil
}

// readKey reads a key file, refusing one of the wrong size or readable or
// writable by others than its owner.
func readKey(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", name)
	}
	if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
		return nil, fmt.Errorf("key file %s has permissions %04o, broader than 0600: others may have read it; if not, chmod 600 it", name, perm)
	}
	if fi.Size() != keySize {
		return nil, fmt.Errorf("key file %s holds %d bytes, want %d: it is not a blaise-agent key, or it is damaged", name, fi.Size(), keySize)
	}
	key := make([]byte, keySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("key file %s: %w", name, err)
	}
	return key, nil
}

// withLock runs f holding the store's lock, exclusive or shared, waiting
// for it as long as it takes.
func (s *Store) withLock(exclusive bool, f func() error) error {
	return s.locked(func(l *flock.Flock) error {
		if exclusive {
			return l.Lock()
		}
		return l.RLock()
	}, f)
}

// withLockContext is withLock with a wait that ends when ctx does.
func (s *Store) withLockContext(ctx context.Context, exclusive bool, f func() error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	return s.locked(func(l *flock.Flock) error {
		var ok bool
		var err error
		if exclusive {
			ok, err = l.TryLockContext(ctx, lockRetry)
		} else {
			ok, err = l.TryRLockContext(ctx, lockRetry)
		}
		if err == nil && !ok {
			err = errors.New("lock not acquired")
		}
		return err
	}, f)
}

// locked takes the lock with acquire and runs f. A new flock.Flock (a new
// open file description) per call makes the goroutines of one process
// exclude each other as processes do.
func (s *Store) locked(acquire func(*flock.Flock) error, f func() error) error {
	l := flock.New(s.path(lockFile))
	if err := acquire(l); err != nil {
		return fmt.Errorf("state directory %s: waiting for the lock %s: %w", s.dir, l.Path(), err)
	}
	defer l.Unlock()
	return f()
}

// NewSessionID returns a fresh random session id (session.NewID).
func (s *Store) NewSessionID() string { return lifecycle.NewID() }

// CreateSession stores a new session. Created (and Updated) are set to now
// when zero. It fails when the id is in use.
func (s *Store) CreateSession(rec *lifecycle.Record) error {
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
	return s.withLock(true, func() error {
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
// ErrNotFound.
func (s *Store) Session(id string) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *lifecycle.Record
	err := s.withLock(false, func() error {
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
func (s *Store) UpdateSession(id string, f func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *lifecycle.Record
	err := s.withLock(true, func() error {
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
// with a *BrokenError that names each broken one.
func (s *Store) Sessions() ([]*lifecycle.Record, error) {
	var recs []*lifecycle.Record
	var broken BrokenError
	err := s.withLock(false, func() error {
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
				broken.Records = append(broken.Records, BrokenRecord{Path: filepath.Join(dir, name),
					Err: fmt.Errorf("state directory %s: %s is not a session directory", s.dir, filepath.Join(dir, name))})
				continue
			}
			rec, err := s.readSession(name)
			if errors.Is(err, ErrNotFound) {
				continue // being created, or its creator was killed
			}
			if err != nil {
				broken.Records = append(broken.Records, BrokenRecord{ID: name, Path: s.sessionPath(name), Err: err})
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

// DueSessions reads every record (session.DueIn): a state directory is a
// person's, whose sessions are few, and it keeps no index. Records that
// cannot be read are named in a *BrokenError, with the others' answer.
func (s *Store) DueSessions(ctx context.Context, now time.Time) ([]string, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	recs, err := s.Sessions()
	if broken := (*BrokenError)(nil); err != nil && !errors.As(err, &broken) {
		return nil, time.Time{}, err
	}
	ids, next := lifecycle.DueIn(recs, now)
	return ids, next, err
}

// BrokenRecord is an entry of the sessions directory that cannot be read as
// a session: a session.json that is corrupt, unreadable or not a file, or
// something that is not a session directory.
type BrokenRecord struct {
	ID   string // the session id, "" when the entry is no session directory
	Path string
	Err  error // names Path and what is wrong with it
}

// BrokenError is the error of Sessions when some records cannot be read.
type BrokenError struct{ Records []BrokenRecord }

func (e *BrokenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d session record(s) cannot be read (repair or move away each one):", len(e.Records))
	for _, r := range e.Records {
		b.WriteString("\n  ")
		b.WriteString(r.Err.Error())
	}
	return b.String()
}

// TranscriptPath is the file of a session's transcript, in the session's
// directory (see CreateSession). It is "" for an
// invalid session id.
func (s *Store) TranscriptPath(id string) string {
	if checkSessionID(id) != nil {
		return ""
	}
	return s.path(sessionsDir, id, transcriptFile)
}

// Transcript opens a session's transcript for appending (0600: transcripts
// may hold what the agent saw), as a stream whose pages are dropped from
// the system's cache behind it (streamfile). An unknown session is an
// error wrapping ErrNotFound.
func (s *Store) Transcript(id string) (io.WriteCloser, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.TranscriptPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// No session directory: no such session, as the SQL stores say.
		return nil, fmt.Errorf("transcript: session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return streamfile.New(f), nil
}

// ReadTranscript opens a session's transcript for reading.
func (s *Store) ReadTranscript(id string) (io.ReadCloser, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	f, err := os.Open(s.TranscriptPath(id))
	if err != nil {
		return nil, fmt.Errorf("session %s: transcript: %w", id, err)
	}
	return f, nil
}

func (s *Store) readSession(id string) (*lifecycle.Record, error) {
	name := s.sessionPath(id)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
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
func (s *Store) writeSession(rec *lifecycle.Record) error {
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

// Persisted is the store's persisted plug state.
func (s *Store) Persisted() lifecycle.Persisted { return persisted{s} }

type persisted struct{ s *Store }

var _ lifecycle.Persisted = persisted{}

// Get returns the value of a plug's persisted state; ok is false when there
// is none.
func (p persisted) Get(ctx context.Context, session, plugID string) ([]byte, bool, error) {
	if err := checkSessionID(session); err != nil {
		return nil, false, err
	}
	if err := checkPlugID(plugID); err != nil {
		return nil, false, err
	}
	var st *persistedState
	err := p.s.withLockContext(ctx, false, func() error {
		var err error
		st, err = p.s.readPersisted(session, plugID)
		return err
	})
	if err != nil || st == nil {
		return nil, false, err
	}
	return st.Value, true, nil
}

// Set stores a plug's persisted state, data being its JSON. It returns once
// the write is durable. The session must exist.
func (p persisted) Set(ctx context.Context, session, plugID, plugName string, data []byte) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	if err := checkPlugID(plugID); err != nil {
		return err
	}
	if !json.Valid(data) {
		return fmt.Errorf("persisted state of plug %s in session %s: the value is not JSON", plugID, session)
	}
	// Built by hand: json.Marshal would compact the value, and Get returns
	// the bytes Set was given.
	name, err := json.Marshal(plugName)
	if err != nil {
		return err
	}
	var plain bytes.Buffer
	plain.WriteString(`{"plug":`)
	plain.Write(name)
	plain.WriteString(`,"value":`)
	plain.Write(data)
	plain.WriteString("}")
	file := p.s.box.Seal(session, plugID, plain.Bytes())

	return p.s.withLockContext(ctx, true, func() error {
		if _, err := os.Stat(p.s.sessionPath(session)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("persisted state of plug %s: session %s: %w", plugID, session, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		dir := filepath.Join(p.s.sessionDir(session), persistedDir)
		if err := mkdirDurable(dir); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		p.s.removeTemps(dir)
		if err := atomicfile.Write(p.s.persistedPath(session, plugID), file, 0o600, true); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		return nil
	})
}

// Delete removes a plug's persisted state; there being none is no error.
func (p persisted) Delete(ctx context.Context, session, plugID string) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	if err := checkPlugID(plugID); err != nil {
		return err
	}
	return p.s.withLockContext(ctx, true, func() error {
		name := p.s.persistedPath(session, plugID)
		if err := os.Remove(name); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(name)); err != nil {
			return fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
		}
		return nil
	})
}

// PersistedIDs returns the ids of the plugs with persisted state in a
// session, sorted.
func (s *Store) PersistedIDs(session string) ([]string, error) {
	if err := checkSessionID(session); err != nil {
		return nil, err
	}
	var ids []string
	err := s.withLock(false, func() error {
		dir := filepath.Join(s.sessionDir(session), persistedDir)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			id, ok := strings.CutSuffix(name, persistedExt)
			if !ok || !e.Type().IsRegular() || checkPlugID(id) != nil {
				return fmt.Errorf("persisted state of session %s: %s is not a persisted state file", session, filepath.Join(dir, name))
			}
			ids = append(ids, id)
		}
		return nil
	})
	slices.Sort(ids)
	return ids, err
}

// PersistedPlug returns the name of the plug that stored a plug id's
// persisted state in a session (named in the orphaned-state report); ok is
// false when there is no such state.
func (s *Store) PersistedPlug(session, plugID string) (name string, ok bool, err error) {
	if err := checkSessionID(session); err != nil {
		return "", false, err
	}
	if err := checkPlugID(plugID); err != nil {
		return "", false, err
	}
	var st *persistedState
	err = s.withLock(false, func() error {
		var err error
		st, err = s.readPersisted(session, plugID)
		return err
	})
	if err != nil || st == nil {
		return "", false, err
	}
	return st.Plug, true, nil
}

// DeletePersisted removes all of a session's persisted state.
func (s *Store) DeletePersisted(session string) error {
	if err := checkSessionID(session); err != nil {
		return err
	}
	return s.withLock(true, func() error {
		dir := filepath.Join(s.sessionDir(session), persistedDir)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("persisted state of session %s: %w", session, err)
		}
		return nil
	})
}

// persistedState is the plaintext of a persisted state file.
type persistedState struct {
	Plug  string          `json:"plug"`
	Value json.RawMessage `json:"value"`
}

// readPersisted reads and decrypts a persisted state file; it returns nil,
// nil when there is none.
func (s *Store) readPersisted(session, plugID string) (*persistedState, error) {
	name := s.persistedPath(session, plugID)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %w", plugID, session, err)
	}
	plain, err := s.box.Open(session, plugID, data)
	var verr *sealed.VersionError
	switch {
	case errors.Is(err, sealed.ErrForeign):
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s is not a blaise-agent persisted state file", plugID, session, name)
	case errors.As(err, &verr):
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s has %v", plugID, session, name, verr)
	case err != nil:
		return nil, fmt.Errorf("persisted state of plug %s in session %s %v: %s", plugID, session, err, name)
	}
	st := new(persistedState)
	if err := json.Unmarshal(plain, st); err != nil || st.Value == nil {
		return nil, fmt.Errorf("persisted state of plug %s in session %s: %s decrypts to a malformed value", plugID, session, name)
	}
	return st, nil
}

// removeTemps removes the temporary files that writers killed mid-write
// left in dir. The caller holds the exclusive lock, so no writer is using
// one.
func (s *Store) removeTemps(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if isTemp(e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// mkdirDurable creates dir (0700) if it is missing and syncs its parent, so
// that the new directory survives a crash.
func mkdirDurable(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(dir))
}
