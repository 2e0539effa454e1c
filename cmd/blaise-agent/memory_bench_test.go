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
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testsupport"
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

// sessionMemory starts `acp` with plugs no-op plugs around the demo agent,
// opens a session, has a prompt answered, and returns the resident memory
// of its processes in KiB, by process (front, session, agent) and kind
// (NAME for all, NAME-anon, NAME-file).
func sessionMemory(b *testing.B, bin string, plugs int) map[string]int {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "blaise.star")
	src := fmt.Sprintf("agent(command = %q, args = [\"demo-agent\"])\nsetup(%s)\n", bin, strings.Join(acptest.NoopPlugs(b, dir, plugs), ", "))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "acp", "-c", cfg, "--state-dir", filepath.Join(dir, "state"))
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
	c := startProcess(b, cmd, cmd.StdinPipe)
	say(b, c, "hello")
	time.Sleep(2 * startOver)
	// What a prompt at rest touches again counts.
	say(b, c, "again")
	session := childRunning(b, c.pid, "session-process")
	procs := map[string]int{"front": c.pid, "session": session, "agent": childRunning(b, session, "demo-agent")}
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

// say sends a prompt of text and reads until its answer.
func say(b *testing.B, c *benchClient, text string) {
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
func childRunning(b *testing.B, pid int, arg string) int {
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
func procKiB(b *testing.B, pid int, file, want string) map[string]int {
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
