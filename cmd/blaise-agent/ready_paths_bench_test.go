package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkReadyServer measures the ready time (BenchmarkReady's: exec to
// the answer of session/new) through `acp --server`, a server on SQLite
// and one runner on loopback, against local `acp`, both around the flood
// agent with no plugs. The two are taken in turn in each iteration, so
// that the machine's drift falls on both; over-acp-ms is the difference
// of their medians. Local `acp` keeps one state directory, as an editor's.
// $BLAISE_BENCH_BIN, when set, is the `blaise-agent` of every process of
// both paths but the agent.
func BenchmarkReadyServer(b *testing.B) {
	l, r := newBenchServerLab(b)
	// Drained, the runner's runs pause: serve then stops at once, rather
	// than after the lease of runs whose runner was killed.
	b.Cleanup(func() { l.drain(r) })
	dir, flood := floodConfig(b, self(b), 0)
	paths := []func() *exec.Cmd{
		func() *exec.Cmd {
			cmd := exec.Command(l.bin, "acp", "-c", flood, "--state-dir", filepath.Join(dir, "state"))
			cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
			return cmd
		},
		func() *exec.Cmd {
			cmd := exec.Command(l.bin, "acp", "--server", l.url, "--agent", "demo")
			cmd.Env = append(os.Environ(), "BLAISE_TOKEN="+l.token)
			return cmd
		},
	}
	// The first start of each is not counted, as in BenchmarkReady.
	for _, start := range paths {
		ready(b, start())
	}
	var local, server []time.Duration
	for i := 0; i < b.N; i++ {
		local = append(local, ready(b, paths[0]()))
		server = append(server, ready(b, paths[1]()))
	}
	reportMedians(b, "acp", local, "server", server)
}

// BenchmarkReadyResume measures a resume as an editor makes it: a new
// `acp` process, initialize, then session/load of a session paused by an
// earlier one, until the answer of the load (the resume run started, the
// agent started and its session loaded). The baseline, taken in turn with
// it, is the demo agent alone answering initialize and session/load of a
// session an earlier process of it made; over-agent-ms is the difference
// of their medians. $BLAISE_BENCH_BIN, when set, is the `acp` measured;
// the agent is the test binary's.
func BenchmarkReadyResume(b *testing.B) {
	bin, measured, dir := self(b), benchCommand(b), b.TempDir()
	cwd := filepath.Join(dir, "work")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		b.Fatal(err)
	}
	agent := func() *exec.Cmd {
		return exec.Command(bin, "demo-agent", "--state-dir", filepath.Join(dir, "agent-alone"))
	}
	cfg := filepath.Join(dir, "blaise.star")
	star := fmt.Sprintf("agent(command = %q, args = [\"demo-agent\", \"--state-dir\", %q])\n", bin, filepath.Join(dir, "agent"))
	if err := os.WriteFile(cfg, []byte(star), 0o644); err != nil {
		b.Fatal(err)
	}
	acp := func() *exec.Cmd {
		cmd := exec.Command(measured, "acp", "-c", cfg, "--state-dir", filepath.Join(dir, "state"))
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
		return cmd
	}
	aloneID, pausedID := openSession(b, agent(), cwd), openSession(b, acp(), cwd)
	var alone, resumed []time.Duration
	for i := 0; i < b.N; i++ {
		alone = append(alone, load(b, agent(), aloneID, cwd))
		resumed = append(resumed, load(b, acp(), pausedID, cwd))
	}
	reportMedians(b, "agent", alone, "resume", resumed)
}

// BenchmarkReadyRun measures `blaise-agent run "hello"` around the demo
// agent, no plugs, from its exec to its exit: a session started, one turn,
// the session paused, the report written. $BLAISE_BENCH_BIN, when set, is
// the `run` measured; the agent is the test binary's.
func BenchmarkReadyRun(b *testing.B) {
	bin, measured, dir := self(b), benchCommand(b), b.TempDir()
	cfg := filepath.Join(dir, "blaise.star")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("agent(command = %q, args = [\"demo-agent\", \"--state-dir\", %q])\n", bin, filepath.Join(dir, "agent"))), 0o644); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(measured, "run", "-c", cfg, "--state-dir", filepath.Join(dir, "state"), "hello")
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("run: %v\n%s", err, out)
		}
		took = append(took, time.Since(t0))
	}
	b.ReportMetric(msOf(median(took)), "ms/run-median")
}

// openSession runs cmd for initialize and session/new in cwd, and returns
// the session's id once cmd has exited (the session paused, for `acp`).
func openSession(b *testing.B, cmd *exec.Cmd, cwd string) string {
	b.Helper()
	var id string
	talk(b, cmd, func(c *benchClient) {
		c.request(b, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
		id = newSessionID(b, c.request(b, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, cwd)))
	})
	return id
}

// load runs cmd for initialize and session/load of id, and returns the time
// from the start to the load's answer (a replayed history read on the way).
func load(b *testing.B, cmd *exec.Cmd, id, cwd string) time.Duration {
	b.Helper()
	var took time.Duration
	t0 := time.Now()
	talk(b, cmd, func(c *benchClient) {
		c.request(b, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
		c.answer(b, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, id, cwd))
		took = time.Since(t0)
	})
	return took
}

// talk starts cmd, has a client on its stdio do its part, then closes the
// client's end and waits for cmd to exit.
func talk(b *testing.B, cmd *exec.Cmd, part func(*benchClient)) {
	b.Helper()
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c := &benchClient{in: in, out: bufio.NewReader(out)}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	part(c)
	in.Close()
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
}

// reportMedians reports the median of each path's samples and the second
// path's median over the first's.
func reportMedians(b *testing.B, base string, baseline []time.Duration, path string, samples []time.Duration) {
	m0, m := median(baseline), median(samples)
	b.ReportMetric(msOf(m0), "ms/"+base+"-median")
	b.ReportMetric(msOf(m), "ms/"+path+"-median")
	b.ReportMetric(msOf(m-m0), "over-"+base+"-ms")
}

func median(samples []time.Duration) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[len(s)/2]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
