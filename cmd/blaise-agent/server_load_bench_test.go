package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
)

// BenchmarkServerLoad: 1, 10, 50, 100 and 200 sessions at once through a
// real server (SQLite) and one runner of the flood agent, each session on
// a client's ACP WebSocket of its own, as `acp --server` opens it. Each
// iteration, every session sends a prompt answered at once, all at the same
// time. It reports the round trips' p50 and p95; the server's resident
// memory above its memory at rest (the runner connected, no session), per
// session; and the session processes' with their agents', per session, as
// PSS (the binary's pages shared between them counted once) and as RSS.
func BenchmarkServerLoad(b *testing.B) {
	for _, n := range []int{1, 10, 50, 100, 200} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			l := newServerLab(b, "", 10*time.Second)
			cfg := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"flood\"})\n", l.bin)
			if err := os.WriteFile(filepath.Join(l.dir, "flood.star"), []byte(cfg), 0o644); err != nil {
				b.Fatal(err)
			}
			r := l.runner("r1", "flood.star")
			rest := rssMiB(b, l.serve.Process.Pid)
			api := &apiclient.Client{URL: l.url, Token: l.token}
			clients := make([]*benchClient, n)
			for i := range clients {
				conn, err := api.DialACP(context.Background(), "demo")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { conn.Close() })
				clients[i] = &benchClient{in: conn, out: bufio.NewReaderSize(conn, 64<<10)}
				clients[i].open(b)
			}
			var mu sync.Mutex
			var took []time.Duration
			for b.Loop() {
				var wg sync.WaitGroup
				for _, c := range clients {
					wg.Go(func() {
						t0 := time.Now()
						err := c.tryPrompt(0)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							b.Error(err)
						}
						took = append(took, time.Since(t0))
					})
				}
				wg.Wait()
			}
			slices.Sort(took)
			ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.95), "p95-ms")
			b.ReportMetric((rssMiB(b, l.serve.Process.Pid)-rest)/float64(n), "server-MiB/session")
			var pss, rss float64
			for _, pid := range descendants(r.cmd.Process.Pid)[1:] {
				pss += smapsMiB(b, pid, "Pss")
				rss += rssMiB(b, pid)
			}
			b.ReportMetric(pss/float64(n), "session-pss-MiB/session")
			b.ReportMetric(rss/float64(n), "session-rss-MiB/session")
		})
	}
}

// smapsMiB is a field in kB of /proc/PID/smaps_rollup, in MiB.
func smapsMiB(b *testing.B, pid int, field string) float64 {
	v, err := procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), field)
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	return v
}
