package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/store/sessiongen"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
)

// BenchmarkServerStoredSessions: a server whose store holds 0, 10,000 or
// 100,000 sessions of history (internal/store/sessiongen), on SQLite and on
// PostgreSQL, with a runner of the demo agent. Each iteration opens a
// session through `acp --server` (session/new) and ends it through the
// API, so that a run starts and ends. It reports:
//
//   - new-ms: session/new's round trip, and x-empty: that against an
//     empty server's on the same database, the two taken in turn;
//   - server-cpu-ms/session: the server's CPU time per iteration;
//   - page-ms, paused-page-ms, title-page-ms: a page of 100 of the list
//     API (GET /v1/sessions?limit=100), of the paused ones, and of those
//     whose title holds a word;
//   - idle-cpu-%: the server's CPU, in % of a core, while nothing happens,
//     over $BLAISE_BENCH_IDLE (default 20s).
func BenchmarkServerStoredSessions(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, stored := range []int{0, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/stored=%d", db, stored), func(b *testing.B) {
				dsn := func() string { return "" }
				if db == "postgres" {
					dsn = func() string { return pgtest.DSN(b) }
				}
				l := newServerLab(b, dsn(), time.Minute)
				generate(b, l, stored)
				l.runner("r1", "blaise.star")
				c := acpServerClient(b, l)
				empty := newServerLab(b, dsn(), time.Minute)
				empty.runner("r1", "blaise.star")
				ce := acpServerClient(b, empty)

				api := &apiclient.Client{URL: l.url, Token: l.token}
				apiEmpty := &apiclient.Client{URL: empty.url, Token: empty.token}
				cpu0 := cpuOf(b, l.serve.Process.Pid)
				var took, tookEmpty time.Duration
				n := 0
				for b.Loop() {
					// In turn, so that the machine's drift touches both alike.
					took += newAndEnd(b, c, api)
					tookEmpty += newAndEnd(b, ce, apiEmpty)
					n++
				}
				b.ReportMetric(float64((cpuOf(b, l.serve.Process.Pid)-cpu0).Microseconds())/1000/float64(n), "server-cpu-ms/session")
				b.ReportMetric(float64(took.Microseconds())/1000/float64(n), "new-ms")
				b.ReportMetric(float64(took)/float64(tookEmpty), "x-empty")

				for _, p := range []struct {
					unit string
					o    apiclient.ListOptions
				}{
					{"page-ms", apiclient.ListOptions{Limit: 100}},
					{"paused-page-ms", apiclient.ListOptions{Limit: 100, State: "paused"}},
					{"title-page-ms", apiclient.ListOptions{Limit: 100, Text: "flaky"}},
				} {
					b.ReportMetric(pageTime(b, api, p.o), p.unit)
				}

				idle := 20 * time.Second
				if s := os.Getenv("BLAISE_BENCH_IDLE"); s != "" {
					var err error
					if idle, err = time.ParseDuration(s); err != nil {
						b.Fatalf("BLAISE_BENCH_IDLE: %v", err)
					}
				}
				cpu1 := cpuOf(b, l.serve.Process.Pid)
				time.Sleep(idle)
				b.ReportMetric(100*float64(cpuOf(b, l.serve.Process.Pid)-cpu1)/float64(idle), "idle-cpu-%")
			})
		}
	}
}

// generate stores n sessions of history of the agent demo in l's store.
func generate(b testing.TB, l *serverLab, n int) {
	if n == 0 {
		return
	}
	store, err := server.StoreOptions{Data: l.data, DB: l.db}.Open(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	recs := sessiongen.Records(n, "demo", "gen", time.Now())
	for len(recs) > 0 {
		batch := recs[:min(len(recs), 5000)]
		if err := store.CreateSessions(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		recs = recs[len(batch):]
	}
}

// acpServerClient is a client of `acp --server` of l's agent demo, with
// one session open.
func acpServerClient(b *testing.B, l *serverLab) *benchClient {
	cmd := exec.Command(l.bin, "acp", "--server", l.url, "--agent", "demo")
	cmd.Env = append(os.Environ(), "BLAISE_TOKEN="+l.token)
	return startProcess(b, cmd, cmd.StdinPipe)
}

// newAndEnd opens a session through c, returning session/new's round trip,
// then ends it through the API: its run starts and ends.
func newAndEnd(b *testing.B, c *benchClient, api *apiclient.Client) time.Duration {
	t0 := time.Now()
	resp := c.answer(b, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, b.TempDir()))
	took := time.Since(t0)
	if _, err := api.End(context.Background(), newSessionID(b, resp)); err != nil {
		b.Fatal(err)
	}
	return took
}

// answer sends a request and returns its answer, passing over the
// notifications that come first.
func (c *benchClient) answer(b *testing.B, method, params string) []byte {
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.id, method, params); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("%s: %v", method, err)
		}
		if bytes.Contains(line, []byte(`"id":`+strconv.Itoa(c.id)+`,`)) {
			return line
		}
	}
}

// pageTime is the median time of a page of the list o chooses, of 21.
func pageTime(b *testing.B, api *apiclient.Client, o apiclient.ListOptions) float64 {
	var took []time.Duration
	for range 21 {
		t0 := time.Now()
		if _, _, err := api.Sessions(context.Background(), o); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	return float64(took[len(took)/2].Microseconds()) / 1000
}
