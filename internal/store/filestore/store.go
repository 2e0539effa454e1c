// Package filestore is the file store: the control plane of one machine
// keeps its sessions, their persisted plug state, transcripts and run locks
// in a state directory. It implements lifecycle.Store (and
// lifecycle.RunLocks) beside the server's SQL stores (sqlstore), and knows
// nothing of the engine that drives it.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
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
//	<dir>/sessions/<id>/plugs.jsonl            its plugs' log lines (ctx.log), per run
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

	// lockRetry is how often a lock wait that honours a context tries again.
	lockRetry = 5 * time.Millisecond
)

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
//
// Store embeds its parts, one a concern and a file, which share its state
// directory, so that their methods are the Store's (the lifecycle.Store the
// engine takes): sessions and transcripts, persisted state, run locks. Its
// own methods are what takes several parts: reports and pruning.
type Store struct {
	*stateDir
	*sessionFiles
	*persistedFiles
	*runLocks
}

// sessionFiles keep the session records and transcripts.
type sessionFiles struct{ *stateDir }

// persistedFiles keep the plugs' persisted state, sealed with box.
type persistedFiles struct {
	*stateDir
	box *sealed.Box
}

// runLocks are the sessions' run locks.
type runLocks struct{ *stateDir }

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
	s := &stateDir{dir: dir}

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
	err = s.waitLock(true, func() error {
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
		if key, err = sealed.LoadKeyFile(s.path(keyFile)); err != nil {
			return err
		}
		return mkdirDurable(filepath.Join(dir, sessionsDir))
	})
	if err != nil {
		return nil, err
	}
	box, err := sealed.New(key)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", s.path(keyFile), err)
	}
	return &Store{stateDir: s, sessionFiles: &sessionFiles{s}, persistedFiles: &persistedFiles{s, box}, runLocks: &runLocks{s}}, nil
}

// StoreExists reports whether dir holds a state directory, without creating
// anything: it is false for a directory that does not exist or holds
// nothing of a store. A directory that holds other files is reported as
// existing, so that OpenStore names them.
func StoreExists(dir string) (bool, error) {
	if dir == "" {
		return false, errors.New("no state directory: set XDG_STATE_HOME or HOME")
	}
	s := &stateDir{dir: dir}
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

// stateDir is a state directory's layout, lock and clock: where each file
// of the store is, the flock every operation takes, and the time records
// are dated with.
type stateDir struct {
	dir string
	// Clock dates records; nil: the machine's.
	Clock lifecycle.Clock
}

func (s *stateDir) now() time.Time {
	var c lifecycle.Clock = lifecycle.RealClock{}
	if s.Clock != nil {
		c = s.Clock
	}
	return c.Now().UTC()
}

// Dir is the state directory, an absolute path.
func (s *stateDir) Dir() string { return s.dir }

func (s *stateDir) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir}, elem...)...)
}

func (s *stateDir) sessionDir(id string) string { return s.path(sessionsDir, id) }

func (s *stateDir) sessionPath(id string) string { return s.path(sessionsDir, id, sessionFile) }

func (s *stateDir) persistedPath(session, plugID string) string {
	return s.path(sessionsDir, session, persistedDir, plugID+persistedExt)
}

// readVersion reads the version file; its error wraps fs.ErrNotExist when
// there is none.
func (s *stateDir) readVersion() (int, error) {
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
func (s *stateDir) checkEmpty() error {
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

// withLock runs f holding the store's lock, exclusive or shared, once ctx
// allows: a flock wait cannot be cut short, and the lock is only ever held
// for a few file operations.
func (s *stateDir) withLock(ctx context.Context, exclusive bool, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.waitLock(exclusive, f)
}

// waitLock runs f holding the store's lock, exclusive or shared, waiting
// for it as long as it takes.
func (s *stateDir) waitLock(exclusive bool, f func() error) error {
	return s.locked(func(l *flock.Flock) error {
		if exclusive {
			return l.Lock()
		}
		return l.RLock()
	}, f)
}

// withLockContext is withLock with a wait that ends when ctx does.
func (s *stateDir) withLockContext(ctx context.Context, exclusive bool, f func() error) error {
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
func (s *stateDir) locked(acquire func(*flock.Flock) error, f func() error) error {
	l := flock.New(s.path(lockFile))
	if err := acquire(l); err != nil {
		return fmt.Errorf("state directory %s: waiting for the lock %s: %w", s.dir, l.Path(), err)
	}
	defer l.Unlock()
	return f()
}

// removeTemps removes the temporary files that writers killed mid-write
// left in dir. The caller holds the exclusive lock, so no writer is using
// one.
func (s *stateDir) removeTemps(dir string) {
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
