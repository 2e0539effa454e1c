package filestore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// holdRunLock takes session id's run lock through a descriptor of its own,
// as the copy a forked child keeps until its exec does.
func holdRunLock(t *testing.T, s *Store, id string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(s.sessionDir(id), runLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// TestL2_RunLockWaitsOutAForkedCopy: a copy of the lock that a forked
// child holds for a moment does not make a session look active; a holder
// that keeps it does, after a bounded wait.
func TestL2_RunLockWaitsOutAForkedCopy(t *testing.T) {
	s := openTestStore(t)
	const id = "sess0000lock"
	if err := s.CreateSession(t.Context(), &lifecycle.Record{ID: id, State: lifecycle.Paused}); err != nil {
		t.Fatal(err)
	}

	release := holdRunLock(t, s, id)
	pause := runLockPause
	defer func() { runLockPause = pause }()
	tries := 0
	runLockPause = func() {
		if tries++; tries == 1 {
			release() // the child's exec closes its copy
		}
	}
	l, err := s.tryRunLock(id, false)
	if err != nil {
		t.Fatalf("after the copy was let go: %v", err)
	}
	l.Release()
	if tries != 1 {
		t.Fatalf("%d tries found the lock held, want 1", tries)
	}
	runLockPause = pause

	release = holdRunLock(t, s, id)
	defer release()
	if _, err := s.tryRunLock(id, false); !errors.Is(err, lifecycle.ErrRunHeld) {
		t.Fatalf("a lock held all along: %v, want lifecycle.ErrRunHeld", err)
	}
	if _, err := s.lockRunOnce(id, false); !errors.Is(err, lifecycle.ErrRunHeld) {
		t.Fatalf("lockRunOnce: %v, want lifecycle.ErrRunHeld at once", err)
	}
}

// TestDiscardRemovesEverything: a session that never ran a plug
// leaves no record, no directory, nothing a listing shows.
func TestDiscardRemovesEverything(t *testing.T) {
	s := openTestStore(t)
	const id = "sess00discrd"
	if err := s.CreateSession(t.Context(), &lifecycle.Record{ID: id, State: lifecycle.Active}); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.sessionDir(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the session's directory: %v, want it gone", err)
	}
	if recs, err := s.Sessions(t.Context()); err != nil || len(recs) != 0 {
		t.Errorf("sessions after discard: %v, %v", recs, err)
	}
}
