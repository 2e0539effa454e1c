package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runLockFile, in a session's directory, is flock'ed while a run of the
// session is alive. The front end takes it before the session becomes
// active and its session process inherits it (RunLockFD), so it is held
// while either lives: "is its run alive" is "is its run lock held", with no
// gap a sweep could take for a crash (L2, L3).
const runLockFile = "run.lock"

// RunLockFD is the file descriptor of the run lock in a session process.
const RunLockFD = 4

// ErrRunHeld is what taking a run lock that a run holds returns.
var ErrRunHeld = errors.New("the run lock is held")

// RunLocks give each session at most one run at a time (L2).
type RunLocks interface {
	// RunLock takes a session's run lock. With wait it waits a moment for
	// a holder that is not a run; with create, the session is being
	// created. A lock a run holds is an error wrapping ErrRunHeld.
	RunLock(id string, create, wait bool) (RunLock, error)
}

// RunLock is a session's run lock, held.
type RunLock interface {
	// Dup returns another holder of the same lock: the lock goes when
	// every holder has let it go.
	Dup() (RunLock, error)
	// Release lets this holder's lock go.
	Release()
}

// RunLock takes a run lock of the file store: an flock, which the session
// process of the run inherits (RunLockFD).
func (s *Store) RunLock(id string, create, wait bool) (RunLock, error) {
	var l *runLock
	var err error
	if wait {
		l, err = s.tryRunLock(id, create)
	} else {
		l, err = s.lockRunOnce(id, create)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// runLock is a session's run lock in the file store, held by this process.
type runLock struct{ f *os.File }

// runLockPatience is how long tryRunLock waits out a holder that is not a
// run: a process that forks (a front end starting another session's
// process, say) gives the child a copy of every lock it has open, which
// the child holds from the fork until its exec.
const runLockPatience = 500 * time.Millisecond

// tryRunLock takes the run lock of a session, waiting at most
// runLockPatience for it: a run holds it much longer, and then the error
// wraps ErrRunHeld. With create, the session's directory is made first (a
// session being created); otherwise a session the store does not hold is
// ErrNotFound.
func (s *Store) tryRunLock(id string, create bool) (*runLock, error) {
	deadline := time.Now().Add(runLockPatience)
	for {
		l, err := s.lockRunOnce(id, create)
		if !errors.Is(err, ErrRunHeld) || time.Now().After(deadline) {
			return l, err
		}
		runLockPause()
	}
}

// runLockPause is the wait between two tries of tryRunLock; tests replace
// it to act at the moment a try found the lock held.
var runLockPause = func() { time.Sleep(5 * time.Millisecond) }

// lockRunOnce takes the run lock of a session if it is free now.
func (s *Store) lockRunOnce(id string, create bool) (*runLock, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	dir := s.sessionDir(id)
	if create {
		if err := mkdirDurable(dir); err != nil {
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, runLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: run lock: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("session %s: %w", id, ErrRunHeld)
		}
		return nil, fmt.Errorf("session %s: run lock: %w", id, err)
	}
	return &runLock{f: f}, nil
}

// Dup returns another holder of the same lock: the lock goes when every
// holder (and every session process that inherited one) has let it go.
func (l *runLock) Dup() (RunLock, error) {
	fd, err := unix.FcntlInt(l.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	return &runLock{f: os.NewFile(uintptr(fd), l.f.Name())}, nil
}

// Release lets this holder's lock go.
func (l *runLock) Release() { l.f.Close() }

// activeError is what a command gets for a session whose run lock another
// process holds.
func activeError(id string) error {
	return fmt.Errorf("session %s is active: a run of it is in progress in another process", id)
}

// MemLocks are run locks of one process, for a control plane whose runs
// are not processes of its machine (a server's).
type MemLocks struct {
	mu   sync.Mutex
	held map[string]int // holders by session
}

// RunLock takes a session's lock; create and wait mean nothing here: a
// holder is always a run.
func (m *MemLocks) RunLock(id string, _, _ bool) (RunLock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[id] > 0 {
		return nil, fmt.Errorf("session %s: %w", id, ErrRunHeld)
	}
	if m.held == nil {
		m.held = map[string]int{}
	}
	m.held[id] = 1
	return &memLock{m: m, id: id}, nil
}

type memLock struct {
	m    *MemLocks
	id   string
	once sync.Once
}

func (l *memLock) Dup() (RunLock, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.held[l.id]++
	return &memLock{m: l.m, id: l.id}, nil
}

func (l *memLock) Release() {
	l.once.Do(func() {
		l.m.mu.Lock()
		defer l.m.mu.Unlock()
		if l.m.held[l.id]--; l.m.held[l.id] <= 0 {
			delete(l.m.held, l.id)
		}
	})
}
