package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// newBenchServerLab starts a server lab whose processes (serve, listen and
// its session processes) are $BLAISE_BENCH_BIN's (benchCommand), and its
// runner r1, whose agent is the test binary's flood agent.
func newBenchServerLab(b *testing.B) (*serverLab, *labRunner) {
	l := &serverLab{t: b, bin: benchCommand(b), dir: b.TempDir(), lease: time.Minute}
	l.start()
	cfg := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"flood\"})\n", self(b))
	if err := os.WriteFile(filepath.Join(l.dir, "flood.star"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return l, l.runner("r1", "flood.star")
}

// throughServer starts a server, a runner of the flood agent and `acp
// --server` with a client on its stdio, all of benchCommand. The other
// processes of its path are the server (first) and the runner with its
// session process and agent.
func throughServer(b *testing.B) *benchClient {
	l, r := newBenchServerLab(b)
	cmd := exec.Command(l.bin, "acp", "--server", l.url, "--agent", "demo")
	cmd.Env = append(os.Environ(), "BLAISE_TOKEN="+l.token)
	c := startProcess(b, cmd, cmd.StdinPipe)
	runner := descendants(r.cmd.Process.Pid)
	// The runner and its session process leave as they do on SIGTERM,
	// through the end of main, which writes their CPU profiles
	// ($BLAISE_TEST_CPUPROFILE).
	b.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		for _, pid := range runner[:2] {
			testsupport.WaitGone(b, pid, "the runner")
		}
	})
	c.also = append([]int{l.serve.Process.Pid}, runner...)
	c.parts = []part{{"client", []int{c.pid}}, {"server", c.also[:1]}, {"runner", runner[:1]}, {"session", runner[1:]}}
	return c
}

// BenchmarkServer measures a client of a server's agent (`acp --server`,
// the server, its runner, the session process) against a client of local
// `blaise-agent acp`, in the same run, as BenchmarkACPFrontEnd does:
// throughput of 1 KiB session/updates and the median round trip of a
// prompt answered at once. path-cpu is the CPU time per message of every
// process between the client and the agent, and of the agent; the other
// cpu figures, of a part of the path: the front end (local `acp`), the
// client (`acp --server`), the server, the runner (`listen`), and the
// session process with its agent, the same in both. x-acp is the
// server path's rate against local acp's in a round of as many messages
// run right after it. $BLAISE_BENCH_BIN, when set, is the `blaise-agent`
// of every process of both paths but the agent.
func BenchmarkServer(b *testing.B) {
	peers := []struct {
		name  string
		start func(b *testing.B) *benchClient
	}{
		{"acp", func(b *testing.B) *benchClient {
			c := throughACP(0)(b)
			c.parts = []part{{"frontend", []int{c.pid}}, {"session", descendants(c.pid)[1:]}}
			return c
		}},
		{"server", throughServer},
	}
	for _, p := range peers {
		b.Run("throughput/"+p.name, func(b *testing.B) {
			c := p.start(b)
			var local *benchClient
			if p.name == "server" {
				local = throughACP(0)(b)
			}
			b.SetBytes(int64(len(acptest.Update1KiB()) + 1))
			cpu0, parts0 := c.cpu(b), c.partsCPU(b)
			b.ResetTimer()
			c.prompt(b, b.N)
			b.StopTimer()
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(float64(c.cpu(b)-cpu0)/float64(b.N), "path-cpu-ns/msg")
			for i, cpu := range c.partsCPU(b) {
				b.ReportMetric(float64(cpu-parts0[i])/float64(b.N), c.parts[i].name+"-cpu-ns/msg")
			}
			if local != nil {
				// Against local acp in a round of as many messages right
				// after, as x-pipe is in BenchmarkACPFrontEnd.
				b.ReportMetric(rate/local.rate(b, b.N), "x-acp")
			}
		})
		b.Run("latency/"+p.name, func(b *testing.B) { roundTrips(b, p.start(b)) })
	}
}

// BenchmarkServerPausedSessions: a server whose store has 1,000 paused
// sessions, with a runner connected. Each iteration lists them through
// the API, as `sessions --server` does; it reports the runner's
// processes (none: a paused session costs no process) and the server's
// resident memory once they were listed.
func BenchmarkServerPausedSessions(b *testing.B) {
	l := newServerLab(b, "", time.Minute)
	r := l.runner("r1", "blaise.star")
	store, err := server.StoreOptions{Data: l.data}.Open(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := 0; i < 1000; i++ {
		rec := &lifecycle.Record{ID: store.NewSessionID(), AgentName: "demo", State: lifecycle.Paused, Created: now, Updated: now, Runs: 1,
			Settings: lifecycle.DefaultSettings(), Resumable: true, PausedAt: now, ExpiresAt: now.Add(24 * time.Hour),
			Pause: &lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: now, Run: 1}}
		if err := store.CreateSession(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
	}
	store.Close()
	c := &apiclient.Client{URL: l.url, Token: l.token}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, err := c.AllSessions(context.Background(), apiclient.ListOptions{Limit: api.MaxListLimit})
		if err != nil || len(recs) != 1000 {
			b.Fatalf("%d sessions: %v", len(recs), err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/list")
	b.ReportMetric(float64(len(descendants(r.cmd.Process.Pid))-1), "runner-processes")
	b.ReportMetric(rssMiB(b, l.serve.Process.Pid), "server-rss-MiB")
}

// rssMiB is a process's resident memory.
func rssMiB(b *testing.B, pid int) float64 { return procStatusMiB(b, pid, "VmRSS") }
