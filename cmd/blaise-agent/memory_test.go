package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// BenchmarkMemory measures the resident memory of each process of a session
// through `blaise-agent acp` around the demo agent, with 0 and 10 no-op
// on_message plugs, at rest: after a prompt, two seconds (past startOver,
// when they gave back what their start needed), and another prompt. The
// processes: the front end (acp), the session process and the agent, each
// in MiB (front-MiB, session-MiB, agent-MiB; medians over b.N sessions),
// and apart the anonymous memory (heap, stacks: -anon-MiB) and the pages of
// the binary and of libraries (-file-MiB), as /proc/PID/status counts them;
// -pss-MiB is the process's share (PSS): a page mapped by n processes (of
// the binary, of libc) counts 1/n in each.
//
// It measures the binary a user runs, built here without the tests (or
// $BLAISE_BENCH_BIN, to compare builds): the test binary is larger, and
// most of a process's resident memory is pages of its binary.
func BenchmarkMemory(b *testing.B) {
	bin := benchBinary(b)
	for _, plugs := range []int{0, 10} {
		b.Run(fmt.Sprintf("%dplugs", plugs), func(b *testing.B) {
			got := map[string][]float64{}
			for i := 0; i < b.N; i++ {
				for name, kib := range sessionMemory(b, bin, plugs) {
					got[name] = append(got[name], float64(kib)/1024)
				}
			}
			for name, v := range got {
				slices.Sort(v)
				b.ReportMetric(v[len(v)/2], name+"-MiB")
			}
		})
	}
}

// benchCommand returns $BLAISE_BENCH_BIN, to compare builds, or self: the
// binary whose processes a benchmark of a path measures. Its agent, the
// flood agent, is this test binary's whichever is measured.
func benchCommand(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("BLAISE_BENCH_BIN"); bin != "" {
		return bin
	}
	return self(b)
}

// benchBinary returns $BLAISE_BENCH_BIN, or the binary built from this
// package into a temporary directory.
func benchBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("BLAISE_BENCH_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "blaise-agent")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// sessionMemory starts a session (startSession), has a prompt answered,
// waits past startOver, has another answered, and returns the resident
// memory of its processes in KiB, by process (front, session, agent) and
// kind (NAME for all, NAME-anon, NAME-file, NAME-pss).
func sessionMemory(b *testing.B, bin string, plugs int) map[string]int {
	b.Helper()
	c, procs := startSession(b, bin, plugs)
	say(b, c, "hello")
	time.Sleep(2 * startOver)
	// What a prompt at rest touches again counts.
	say(b, c, "again")
	out := map[string]int{}
	for name, pid := range procs {
		rss := procKiB(b, pid, "status", "VmRSS")
		out[name] = rss["VmRSS"]
		out[name+"-anon"] = rss["RssAnon"]
		out[name+"-file"] = rss["RssFile"]
		out[name+"-pss"] = procKiB(b, pid, "smaps_rollup", "Pss")["Pss"]
	}
	return out
}

// startSession starts `acp` of bin with plugs no-op plugs around the demo
// agent and opens a session; it returns the client and the processes by
// name: front, session, agent.
func startSession(tb testing.TB, bin string, plugs int, env ...string) (*benchClient, map[string]int) {
	tb.Helper()
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "blaise.star")
	src := fmt.Sprintf("agent(command = %q, args = [\"demo-agent\"])\nsetup(%s)\n", bin, strings.Join(acptest.NoopPlugs(tb, dir, plugs), ", "))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "acp", "-c", cfg, "--state-dir", filepath.Join(dir, "state"))
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg")), env...)
	c := startProcess(tb, cmd, cmd.StdinPipe)
	session := childRunning(tb, c.pid, "session-process")
	return c, map[string]int{"front": c.pid, "session": session, "agent": childRunning(tb, session, "demo-agent")}
}

// TestSessionProcessesGiveBackTheirStartsPages: once their start is over
// (startOver; here a signal, so that the pages are counted before it
// however slowly a loaded machine started them), the front end, the session
// process and the agent each hold fewer pages of the binary's code and
// constant data than when the session was ready (they unmapped those only
// their start needed), and the session goes on: a prompt after that is
// answered.
func TestSessionProcessesGiveBackTheirStartsPages(t *testing.T) {
	c, procs := startSession(t, self(t), 0, "BLAISE_TEST_RELEASE_ON_USR1=1")
	say(t, c, "hello")
	ready := map[string]int{}
	for name, pid := range procs {
		ready[name] = readOnlyBinaryKiB(t, pid)
	}
	for _, pid := range procs {
		if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	for name, pid := range procs {
		testsupport.Eventually(t, fmt.Sprintf("the %s (%d KiB of the binary read-only when ready) to give back pages", name, ready[name]), func() bool {
			return readOnlyBinaryKiB(t, pid) < ready[name]
		})
	}
	say(t, c, "again")
}

// readOnlyBinaryKiB sums the resident memory of the read-only mappings of
// the process's binary, from /proc/PID/smaps.
func readOnlyBinaryKiB(tb testing.TB, pid int) int {
	tb.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		tb.Skip("no /proc: ", err)
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	total, counting := 0, false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-"):
			counting = len(f) >= 6 && f[5] == exe && !strings.Contains(f[1], "w")
		case counting && len(f) == 3 && f[0] == "Rss:":
			kib, _ := strconv.Atoi(f[1])
			total += kib
		}
	}
	if total == 0 {
		tb.Fatalf("process %d: no resident read-only mapping of %s", pid, exe)
	}
	return total
}

// say sends a prompt of text and reads until its answer.
func say(b testing.TB, c *benchClient, text string) {
	b.Helper()
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`+"\n", c.id, c.sid, text); err != nil {
		b.Fatal(err)
	}
	answer := []byte(fmt.Sprintf(`"id":%d,`, c.id))
	for {
		line, err := c.out.ReadSlice('\n')
		if err != nil {
			b.Fatalf("the prompt's answer: %v", err)
		}
		if bytes.Contains(line, answer) && bytes.Contains(line, []byte(`"stopReason"`)) {
			return
		}
	}
}

// childRunning returns the child of pid whose command line holds arg.
func childRunning(b testing.TB, pid int, arg string) int {
	b.Helper()
	for _, child := range testsupport.Children(pid) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			return child
		}
	}
	b.Fatalf("no child of process %d runs %s", pid, arg)
	return 0
}

// procKiB returns the lines in kB of /proc/PID/FILE, in KiB by name; want
// is one that must be there.
func procKiB(b testing.TB, pid int, file, want string) map[string]int {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	defer f.Close()
	out := map[string]int{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		if kib, ok := strings.CutSuffix(strings.TrimSpace(value), " kB"); ok {
			out[name], _ = strconv.Atoi(kib)
		}
	}
	if _, ok := out[want]; !ok {
		b.Fatalf("no %s in /proc/%d/%s", want, pid, file)
	}
	return out
}
