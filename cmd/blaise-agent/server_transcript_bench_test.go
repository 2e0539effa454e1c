package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/store/sessiongen"
)

// BenchmarkServerTranscript: a server whose store holds one session with a
// long transcript (internal/store/sessiongen: $BLAISE_BENCH_UPDATES
// updates, default 200,000, about 1.2 KB each). For each way a transcript
// leaves the server (the session's page, its /events held for a while,
// the text and JSON-lines downloads, the API) on a freshly started server,
// 4 viewers read it at once to its end; it reports the server's peak
// memory above its memory at rest, per viewer, as <kind>-MiB/viewer; the
// page's time and size; and the peak memory and time of `sessions log
// --server` (and --json), its output read and dropped.
func BenchmarkServerTranscript(b *testing.B) {
	updates := 200_000
	if s := os.Getenv("BLAISE_BENCH_UPDATES"); s != "" {
		var err error
		if updates, err = strconv.Atoi(s); err != nil {
			b.Fatalf("BLAISE_BENCH_UPDATES: %v", err)
		}
	}
	l := newServerLab(b, "", time.Minute)
	id, size := storeTranscript(b, l, updates)
	browser, _ := l.signedIn(b)
	const viewers = 4
	for b.Loop() {
		b.ReportMetric(float64(size)/(1<<20), "transcript-MiB")
		for _, k := range []struct{ kind, path string }{
			{"page", "/sessions/" + id},
			{"events", "/sessions/" + id + "/events"},
			{"text", "/sessions/" + id + "/transcript"},
			{"jsonl", "/sessions/" + id + "/transcript.jsonl"},
			{"api", "/v1/sessions/" + id + "/transcript"},
		} {
			l.restartServer()
			rest := procStatusMiB(b, l.serve.Process.Pid, "VmRSS")
			var wg sync.WaitGroup
			for range viewers {
				wg.Go(func() { view(b, l, browser, k.kind, l.url+k.path) })
			}
			wg.Wait()
			b.ReportMetric((procStatusMiB(b, l.serve.Process.Pid, "VmHWM")-rest)/viewers, k.kind+"-MiB/viewer")
		}
		t0 := time.Now()
		_, page := get(b, browser, l.url+"/sessions/"+id)
		b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "page-ms")
		b.ReportMetric(float64(len(page))/1024, "page-KiB")
		for _, records := range []bool{false, true} {
			args := []string{"sessions", "log", id, "--server", l.url, "--token", l.token}
			unit := "log"
			if records {
				args, unit = append(args, "--json"), "log-json"
			}
			cmd := exec.Command(l.bin, args...)
			out := &countingWriter{w: io.Discard}
			cmd.Stdout, cmd.Stderr = out, os.Stderr
			t0 := time.Now()
			peak, err := peakMiB(cmd)
			if err != nil {
				b.Fatalf("sessions log: %v", err)
			}
			if records && out.n != size {
				b.Fatalf("sessions log --json wrote %d bytes of a transcript of %d", out.n, size)
			}
			b.ReportMetric(time.Since(t0).Seconds(), unit+"-s")
			b.ReportMetric(peak, unit+"-MiB")
		}
	}
}

// storeTranscript stores a session with a generated transcript of updates
// session updates in l's store, and returns its id and the transcript's
// size.
func storeTranscript(b *testing.B, l *serverLab, updates int) (string, int64) {
	ctx := context.Background()
	store, err := server.StoreOptions{Data: l.data, DB: l.db}.Open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rec := sessiongen.Records(1, "demo", "transcript", time.Now())[0]
	if err := store.CreateSessions(ctx, []*lifecycle.Record{rec}); err != nil {
		b.Fatal(err)
	}
	w, err := store.Transcript(ctx, rec.ID)
	if err != nil {
		b.Fatal(err)
	}
	n := &countingWriter{w: w}
	if err := sessiongen.Transcript(n, updates, 1); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return rec.ID, n.n
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// restartServer stops l's server and starts it again, with nothing of the
// last one's heap.
func (l *serverLab) restartServer() {
	l.t.Helper()
	_ = l.serve.Process.Signal(syscall.SIGTERM)
	_ = l.serve.Wait()
	l.startServer("127.0.0.1:0")
}

// view reads u to its end as a viewer of kind does: the dashboard's with
// its browser, holding /events for 2 s; the API's with l's token.
func view(b *testing.B, l *serverLab, browser *http.Client, kind, u string) {
	ctx := context.Background()
	if kind == "events" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	c := browser
	if kind == "api" {
		c = http.DefaultClient
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Errorf("%s: %v", kind, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %s", kind, resp.Status)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && kind != "events" {
		b.Errorf("%s: %v", kind, err)
	}
}

// peakMiB runs cmd to its end and returns its peak resident memory, as
// its VmHWM read every 5 ms: its rusage's would be the benchmark's, whose
// memory the child shares until it executes.
func peakMiB(cmd *exec.Cmd) (float64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	peak := 0.0
	for {
		select {
		case err := <-done:
			return peak, err
		case <-tick.C:
			if hwm, err := procStatus(cmd.Process.Pid, "VmHWM"); err == nil {
				peak = max(peak, hwm)
			}
		}
	}
}

// procStatusMiB is a field in kB of /proc/PID/status, in MiB.
func procStatusMiB(b *testing.B, pid int, field string) float64 {
	v, err := procStatus(pid, field)
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	return v
}

// procStatus is a field in kB of /proc/PID/status, in MiB (0: none).
func procStatus(pid int, field string) (float64, error) {
	return procField(fmt.Sprintf("/proc/%d/status", pid), field)
}

// procField is a field in kB of a file of /proc, in MiB (0: none).
func procField(path, field string) (float64, error) {
	status, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024, nil
		}
	}
	return 0, nil
}
