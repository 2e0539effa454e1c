package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// spareProcess starts the spare session process of e and returns its pid:
// the child of the test marked as a spare.
func spareProcess(t *testing.T, e *engine.Engine) int {
	t.Helper()
	before := testsupport.Children(os.Getpid())
	e.Spare = engine.NewSpare(e)
	t.Cleanup(e.Spare.Drop)
	if err := e.Spare.Start(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range testsupport.Children(os.Getpid()) {
		if !slices.Contains(before, pid) && marked(pid) {
			return pid
		}
	}
	t.Fatal("no spare session process among the test's children")
	return 0
}

// marked reports whether process pid was started as a spare.
func marked(pid int) bool {
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return slices.Contains(strings.Split(string(env), "\x00"), engine.SpareEnv+"=1")
}

// TestL2_ASpareSessionProcessTakesTheNextRunWithItsLock: the run started
// next is served by the spare, in the session's directory, holding the
// session's run lock for as long as it lives; its agent does not inherit
// the spare's mark.
func TestL2_ASpareSessionProcessTakesTheNextRunWithItsLock(t *testing.T) {
	e, cfg := demoLab(t)
	ctx := t.Context()
	spare := spareProcess(t, e)
	live, err := e.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, live, e.Dir)
	rec, err := e.Store.Session(ctx, live.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.PID != spare {
		t.Fatalf("the run is in process %d, not in the spare %d", rec.PID, spare)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", spare)); err != nil || cwd != e.Dir {
		t.Errorf("the run's process runs in %q (%v), want the session's directory %q", cwd, err, e.Dir)
	}
	if lock, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", spare, engine.RunLockFD)); err != nil || filepath.Base(lock) != "run.lock" || filepath.Base(filepath.Dir(lock)) != live.ID {
		t.Errorf("file descriptor %d of the run's process is %q (%v), want the session's run lock", engine.RunLockFD, lock, err)
	}
	agents := testsupport.Children(spare)
	if len(agents) == 0 {
		t.Fatal("the run started no agent")
	}
	for _, pid := range agents {
		if marked(pid) {
			t.Errorf("the agent (process %d) inherited %s", pid, engine.SpareEnv)
		}
	}
	// The front end's own holders are gone: the lock is the run's.
	locks := e.Store.(lifecycle.RunLocks)
	if _, err := locks.RunLock(live.ID, false, false); !errors.Is(err, lifecycle.ErrRunHeld) {
		t.Fatalf("the run lock of a live run in the spare: %v, want it held", err)
	}
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	if rec, err := live.Wait(ctx); err != nil || rec.State != lifecycle.Paused {
		t.Fatalf("after the stop: %+v, %v", rec, err)
	}
	testsupport.WaitGone(t, spare, "the run's process")
	lock, err := locks.RunLock(live.ID, false, false)
	if err != nil {
		t.Fatalf("the run lock once the run ended: %v", err)
	}
	lock.Release()
}

// pidWrites counts the writes that name a session process (Record.PID).
type pidWrites struct {
	*filestore.Store
	n atomic.Int32
}

func (s *pidWrites) UpdateSession(ctx context.Context, id string, f func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	return s.Store.UpdateSession(ctx, id, func(r *lifecycle.Record) error {
		before := r.PID
		err := f(r)
		if err == nil && r.PID != 0 && r.PID != before {
			s.n.Add(1)
		}
		return err
	})
}

// TestARunInTheSpareIsNamedByTheWriteThatBeginsIt: a new session's record
// names the spare that runs it as it is created, and a resume's names its
// spare as the run begins: no write of its own for the process, which the
// session process would wait behind as it opens the store.
func TestARunInTheSpareIsNamedByTheWriteThatBeginsIt(t *testing.T) {
	e, cfg := demoLab(t)
	store := &pidWrites{Store: e.Store.(*filestore.Store)}
	e.Store = store
	ctx := t.Context()
	// run checks that run l is in process spare, named by writes writes so
	// far, and ends it; the session is paused then, its process unnamed.
	run := func(what string, l *engine.Live, spare int, writes int32) {
		t.Helper()
		if rec, err := e.Store.Session(ctx, l.ID); err != nil || rec.PID != spare {
			t.Fatalf("the %s's process: %+v, %v (the spare was %d)", what, rec, err, spare)
		}
		if n := store.n.Load(); n != writes {
			t.Errorf("after the %s, %d writes named the session process, want %d", what, n, writes)
		}
		if err := l.StopIdle(); err != nil {
			t.Fatal(err)
		}
		if rec, err := l.Wait(ctx); err != nil || rec.PID != 0 {
			t.Fatalf("after the %s: %+v, %v", what, rec, err)
		}
	}
	spare := spareProcess(t, e)
	live, err := e.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, live, e.Dir)
	run("start", live, spare, 0)
	// A resume with a spare of another front end: named as it begins.
	e.Spare = nil
	spare = spareProcess(t, e)
	if live, err = e.Resume(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	run("resume", live, spare, 1)
}

// TestASpareThatDiedIsReplacedByAProcessOfTheRun: a spare killed before a
// run took it costs the run nothing but its own start; and no spare is
// started after the first run.
func TestASpareThatDiedIsReplacedByAProcessOfTheRun(t *testing.T) {
	e, cfg := demoLab(t)
	ctx := t.Context()
	spare := spareProcess(t, e)
	if err := syscall.Kill(spare, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the spare to die", func() bool { return !testsupport.Alive(spare) })
	live, err := e.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, live, e.Dir)
	if rec, err := e.Store.Session(ctx, live.ID); err != nil || rec.PID == spare || rec.PID == 0 {
		t.Fatalf("the run's process: %+v, %v (the spare was %d)", rec, err, spare)
	}
	// Once a run was launched, the front end's spare is spent.
	if err := e.Spare.Start(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range testsupport.Children(os.Getpid()) {
		if marked(pid) && testsupport.Alive(pid) {
			t.Errorf("a spare (process %d) was started after the first run", pid)
		}
	}
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	if rec, err := live.Wait(ctx); err != nil || rec.State != lifecycle.Paused {
		t.Fatalf("after the stop: %+v, %v", rec, err)
	}
}

// TestASpareNoRunTookIsStoppedAfterItsLife: an engine whose spare waits in
// vain stops it, and Drop returns once it has exited.
func TestASpareNoRunTookIsStoppedAfterItsLife(t *testing.T) {
	e, _ := demoLab(t)
	engine.SetSpareLife(t, 100*time.Millisecond)
	spare := spareProcess(t, e)
	testsupport.Eventually(t, "a spare past its life to be stopped and reaped", func() bool { return reaped(spare) })

	engine.SetSpareLife(t, time.Hour)
	spare = spareProcess(t, e)
	e.Spare.Drop()
	if !reaped(spare) {
		t.Fatalf("the spare %d is still there once Drop returned", spare)
	}
}

// reaped reports whether process pid has exited and been waited for.
func reaped(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, fs.ErrNotExist)
}
