package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// runLockFile, in a session's directory, is flock'ed while a run of the
// session is alive. The front end takes it before the session becomes
// active and its session process inherits it (engine.RunLockFD), so it is
// held while either lives: "is its run alive" is "is its run lock held",
// with no gap a sweep could take for a crash (L2, L3).
const runLockFile = "run.lock"

// RunLock takes a run lock of the file store: an flock, which the session
// process of the run inherits (engine.RunLockFD).
func (s *runLocks) RunLock(id string, create, wait bool) (lifecycle.RunLock, error) {
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

// File is the lock's open file, for a session process to inherit.
func (l *runLock) File() *os.File { return l.f }

// runLockPatience is how long tryRunLock waits out a holder that is not a
// run: a process that forks (a front end starting another session's
// process, say) gives the child a copy of every lock it has open, which
// the child holds from the fork until its exec.
const runLockPatience = 500 * time.Millisecond

// tryRunLock takes the run lock of a session, waiting at most
// runLockPatience for it: a run holds it much longer, and then the error
// wraps lifecycle.ErrRunHeld. With create, the session's directory is made first (a
// session being created); otherwise a session the store does not hold is
// lifecycle.ErrNotFound.
func (s *runLocks) tryRunLock(id string, create bool) (*runLock, error) {
	deadline := time.Now().Add(runLockPatience)
	for {
		l, err := s.lockRunOnce(id, create)
		if !errors.Is(err, lifecycle.ErrRunHeld) || time.Now().After(deadline) {
			return l, err
		}
		runLockPause()
	}
}

// runLockPause is the wait between two tries of tryRunLock; tests replace
// it to act at the moment a try found the lock held.
var runLockPause = func() { time.Sleep(5 * time.Millisecond) }

// lockRunOnce takes the run lock of a session if it is free now.
func (s *runLocks) lockRunOnce(id string, create bool) (*runLock, error) {
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
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: run lock: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrRunHeld)
		}
		return nil, fmt.Errorf("session %s: run lock: %w", id, err)
	}
	return &runLock{f: f}, nil
}

// Dup returns another holder of the same lock: the lock goes when every
// holder (and every session process that inherited one) has let it go.
func (l *runLock) Dup() (lifecycle.RunLock, error) {
	fd, err := unix.FcntlInt(l.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	return &runLock{f: os.NewFile(uintptr(fd), l.f.Name())}, nil
}

// Release lets this holder's lock go.
func (l *runLock) Release() {
	l.f.Close()
}
