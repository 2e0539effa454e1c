// Package testsupport holds the helpers that tests of several packages
// share: waiting for a condition or for a process to be gone, reading the
// process table, a buffer safe for concurrent writers, and golden files.
package testsupport

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Patience is how long Eventually and WaitGone wait before failing. It is
// long because a hostd cut off from the network notices by its keepalives,
// after at most 30 s; a passing test waits only as long as the event takes.
const Patience = 45 * time.Second

// poll is how often a condition is checked again.
const poll = 5 * time.Millisecond

// Eventually waits until cond holds and fails the test if it does not
// within Patience; what names the awaited event in the failure.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Wait(cond) {
		t.Fatalf("timed out after %s waiting for %s", Patience, what)
	}
}

// Wait waits until cond holds, for Patience at most, and reports whether
// it held: for a test that says itself what it found instead.
func Wait(cond func() bool) bool {
	return within(Patience, cond)
}

// within reports whether cond holds before d has passed.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(poll) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// stat returns the fields of /proc/pid/stat after the command name (state,
// ppid, …); the name may hold spaces and parentheses, so they are read after
// the last ')'.
func stat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// Alive reports whether pid is a running process. A zombie has ended, only
// its parent has not reaped it yet, so it counts as gone.
func Alive(pid int) bool {
	f, ok := stat(pid)
	if !ok && runtime.GOOS != "linux" {
		// No /proc: ask the kernel, for which a zombie is still alive.
		p, err := os.FindProcess(pid)
		return err == nil && p.Signal(syscall.Signal(0)) == nil
	}
	return ok && (len(f) == 0 || (f[0] != "Z" && f[0] != "X"))
}

// Gone waits until pid is no longer Alive, for Patience at most, and
// reports whether it is gone.
func Gone(pid int) bool {
	return Wait(func() bool { return !Alive(pid) })
}

// WaitGone waits until pid is no longer Alive and fails the test if it
// still is after Patience; what names the process in the failure.
func WaitGone(t testing.TB, pid int, what string) {
	t.Helper()
	if !Gone(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("%s (process %d) is still running: %s", what, pid, b)
	}
}

// Children lists the child processes of pid.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var c int
		if _, err := fmt.Sscan(e.Name(), &c); err != nil {
			continue
		}
		if f, ok := stat(c); ok && len(f) > 1 && f[1] == fmt.Sprint(pid) {
			out = append(out, c)
		}
	}
	return out
}

// ReadPid waits until the file at path holds a whole line (a process
// writes it when it starts) and returns the pid on it.
func ReadPid(t testing.TB, path string) int {
	t.Helper()
	var b []byte
	Eventually(t, "a pid in "+path, func() bool {
		b, _ = os.ReadFile(path)
		return bytes.HasSuffix(b, []byte("\n"))
	})
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// Buffer is a bytes.Buffer safe for concurrent use: a log or a transcript
// that a test reads while the code under test writes it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// WriteString writes s.
func (b *Buffer) WriteString(s string) (int, error) {
	return b.Write([]byte(s))
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Take returns what was written so far and empties the buffer.
func (b *Buffer) Take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	b.b.Reset()
	return s
}

// WantErr fails the test unless err is an error whose message holds every
// one of parts.
func WantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// UpdateGolden is the environment variable that, set to 1, makes Golden
// rewrite the files instead of comparing with them.
const UpdateGolden = "BLAISE_UPDATE_GOLDEN"

// Golden compares got with the file at path, or rewrites the file (and its
// folder) when UpdateGolden is 1.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if os.Getenv(UpdateGolden) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// ProcessCPU is the user and system CPU time this process has used, for
// benchmarks that report it per operation.
func ProcessCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
