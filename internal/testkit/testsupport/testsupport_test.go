package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// recorder is a testing.TB that keeps its failures instead of failing.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var ready atomic.Bool
	go ready.Store(true)
	Eventually(t, "the goroutine", ready.Load)
}

func TestWaitReportsAConditionThatHolds(t *testing.T) {
	if !Wait(func() bool { return true }) {
		t.Fatal("a condition that holds did not")
	}
}

func TestWithinGivesUpAfterItsTime(t *testing.T) {
	calls := 0
	if within(3*poll, func() bool { calls++; return false }) {
		t.Fatal("a condition that never holds held")
	}
	if calls < 2 {
		t.Fatalf("the condition was checked %d times", calls)
	}
}

// sleeper starts a process that runs until it is killed.
func sleeper(t *testing.T) *exec.Cmd {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestAliveAndChildrenSeeARunningChild(t *testing.T) {
	cmd := sleeper(t)
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatalf("process %d is not alive", pid)
	}
	if kids := Children(os.Getpid()); !slices.Contains(kids, pid) {
		t.Fatalf("children %v lack %d", kids, pid)
	}
}

func TestWaitGoneCountsAZombieAsGone(t *testing.T) {
	cmd := sleeper(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie.
	WaitGone(t, cmd.Process.Pid, "the killed sleeper")
	_ = cmd.Wait()
	if !Gone(cmd.Process.Pid) || Alive(cmd.Process.Pid) {
		t.Fatal("a reaped process is alive")
	}
}

func TestReadPidWaitsForAWholeLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pid")
	go func() {
		_ = os.WriteFile(path+".tmp", []byte("42\n"), 0o644)
		_ = os.Rename(path+".tmp", path)
	}()
	if pid := ReadPid(t, path); pid != 42 {
		t.Fatalf("read %d", pid)
	}
	_ = os.WriteFile(path, []byte("x\n"), 0o644)
	r := &recorder{TB: t}
	ReadPid(r, path)
	if !strings.Contains(r.failed, path) {
		t.Fatalf("a bad pid file reads %q", r.failed)
	}
}

func TestBufferTakesWhatConcurrentWritersWrote(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.WriteString("ab") })
	}
	wg.Wait()
	if got := b.Take(); got != strings.Repeat("ab", 8) {
		t.Fatalf("took %q", got)
	}
	if got := b.String(); got != "" {
		t.Fatalf("after Take: %q", got)
	}
}

func TestGoldenComparesAndRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	t.Setenv(UpdateGolden, "1")
	Golden(t, path, []byte("one\n"))
	t.Setenv(UpdateGolden, "")
	Golden(t, path, []byte("one\n"))
	r := &recorder{TB: t}
	Golden(r, path, []byte("two\n"))
	if !strings.Contains(r.failed, "two") || !strings.Contains(r.failed, "one") || !strings.Contains(r.failed, path) {
		t.Fatalf("the mismatch reads %q", r.failed)
	}
}
