package main

import (
	"fmt"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkReady measures what a person waits for when an editor starts an
// agent: from the exec of the command to the answer of session/new, after
// initialize. The agent answers at once (the flood agent); its time alone,
// measured in the same run, is the baseline: each path reports its median
// and the median over the agent's (over-agent-ms), through `acp` with 0 and
// 10 no-op plugs. Each path's first start is not counted: `acp` then makes
// its state directory and learns the agent's capabilities by starting it
// alone, which an editor's later starts find done; acp-first counts that
// first start, on a new state directory each time; acp-200stored starts
// where 200 paused sessions are kept, which acp settles (reads) at each
// start. $BLAISE_BENCH_BIN, when set, is the `blaise-agent` whose `acp` is
// measured; the agent stays this test binary's.
func BenchmarkReady(b *testing.B) {
	bin, measured := self(b), benchCommand(b)
	agent := func(b *testing.B) func() *exec.Cmd {
		return func() *exec.Cmd {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "BLAISE_TEST_AGENT=flood")
			return cmd
		}
	}
	acp := func(plugs int, first bool, stored int) func(b *testing.B) func() *exec.Cmd {
		return func(b *testing.B) func() *exec.Cmd {
			dir, cfg := floodConfig(b, bin, plugs)
			storePaused(b, filepath.Join(dir, "state"), stored)
			return func() *exec.Cmd {
				if first {
					dir, cfg = floodConfig(b, bin, plugs)
				}
				cmd := exec.Command(measured, "acp", "-c", cfg, "--state-dir", filepath.Join(dir, "state"))
				cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
				return cmd
			}
		}
	}
	var baseline time.Duration
	for _, p := range []struct {
		name  string
		start func(b *testing.B) func() *exec.Cmd
	}{
		{"agent", agent},
		{"acp", acp(0, false, 0)},
		{"acp-10plugs", acp(10, false, 0)},
		{"acp-first", acp(0, true, 0)},
		{"acp-200stored", acp(0, false, 200)},
	} {
		b.Run(p.name, func(b *testing.B) {
			start := p.start(b)
			ready(b, start())
			samples := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				samples = append(samples, ready(b, start()))
			}
			m := median(samples)
			b.ReportMetric(msOf(m), "ms/ready-median")
			if p.name == "agent" {
				baseline = m
			} else if baseline > 0 {
				b.ReportMetric(msOf(m-baseline), "over-agent-ms")
			}
		})
	}
}

// ready starts cmd, sends initialize and session/new, and returns the time
// from the start to session/new's answer; then it closes the client's end
// and waits for the process.
func ready(b *testing.B, cmd *exec.Cmd) time.Duration {
	b.Helper()
	cwd := b.TempDir()
	var took time.Duration
	t0 := time.Now()
	talk(b, cmd, func(c *benchClient) {
		c.request(b, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
		c.request(b, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, cwd))
		took = time.Since(t0)
	})
	return took
}

// storePaused keeps n paused sessions in the state directory dir (none:
// nothing is made).
func storePaused(b *testing.B, dir string, n int) {
	if n == 0 {
		return
	}
	store, err := filestore.OpenStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for range n {
		rec := &lifecycle.Record{ID: store.NewSessionID(), State: lifecycle.Paused, Created: now, Updated: now, Runs: 1,
			Settings: lifecycle.DefaultSettings(), Resumable: true, PausedAt: now, ExpiresAt: now.Add(24 * time.Hour),
			Pause: &lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: now, Run: 1}}
		if err := store.CreateSession(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
	}
}
