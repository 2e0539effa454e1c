package chain_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// peer is an agent process, reached either directly through its pipes (the
// baseline) or through the proxy and its chain.
type peer struct {
	in  io.WriteCloser
	out *bufio.Reader
	end func()
}

func plainPipe(b *testing.B, mode string) *peer {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BLAISE_TEST_AGENT="+mode)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &peer{in: in, out: bufio.NewReaderSize(out, 1<<20), end: func() { in.Close(); _ = cmd.Wait() }}
}

// throughProxy runs the agent behind a chain of the plugs whose sources
// are given in outer, then plugs no-op on_message plugs.
func throughProxy(b *testing.B, mode string, plugs int, outer ...string) *peer {
	dir := b.TempDir()
	var uses []string
	for i, src := range outer {
		name := fmt.Sprintf("outer%d.star", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		uses = append(uses, fmt.Sprintf("use(%q)", "./"+name))
	}
	uses = append(uses, acptest.NoopPlugs(b, dir, plugs)...)
	cfgText := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": %q})\nsetup(%s)\n", os.Args[0], mode, strings.Join(uses, ", "))
	path := filepath.Join(dir, "blaise.star")
	if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
		b.Fatal(err)
	}
	logger := log.New(io.Discard)
	cfg, err := chain.LoadConfig(path, logger)
	if err != nil {
		b.Fatal(err)
	}
	// OS pipes, as between a front end and its session process.
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	r := chain.New(chain.Options{
		Config: cfg, SessionID: "bench", Kind: lifecycle.StartRun, Logger: logger,
		Client: &chain.Client{In: inR, Out: outW},
	})
	done := make(chan struct{})
	go func() {
		r.Execute(context.Background())
		outW.Close()
		close(done)
	}()
	return &peer{in: inW, out: bufio.NewReaderSize(outR, 1<<20), end: func() {
		r.Stop(lifecycle.Stop{Reason: "closed"})
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		inW.Close()
		<-done
	}}
}

// benchFlood has the agent behind pr stream b.N 1 KiB session/updates and
// reads them (MB/s, msgs/s), and reports the CPU time of this process
// (client and proxy, not the agent) per message: what the proxy costs,
// however busy the machine.
func benchFlood(b *testing.B, pr *peer) {
	defer pr.end()
	b.SetBytes(int64(len(acptest.Update1KiB()) + 1))
	cpu0 := testsupport.ProcessCPU(b)
	b.ResetTimer()
	if _, err := fmt.Fprintf(pr.in, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"%d"}]}}`+"\n", b.N); err != nil {
		b.Fatal(err)
	}
	// The updates, then the prompt's answer.
	for i := 0; i <= b.N; i++ {
		if _, err := pr.out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(testsupport.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/msg")
}

// BenchmarkProxy measures 1 KiB session/updates through the proxy with 0, 1
// and 5 no-op on_message plugs against a plain pipe from the same agent
// process. Throughput: the agent streams updates, the client reads them
// (MB/s, msgs/s). Latency: one message in flight, echoed by the agent, so it
// crosses the proxy twice (median µs per round trip).
func BenchmarkProxy(b *testing.B) {
	line := []byte(acptest.Update1KiB() + "\n")
	peers := []struct {
		name  string
		start func(b *testing.B, mode string) *peer
	}{
		{"plain-pipe", plainPipe},
		{"plugs-0", func(b *testing.B, mode string) *peer { return throughProxy(b, mode, 0) }},
		{"plugs-1", func(b *testing.B, mode string) *peer { return throughProxy(b, mode, 1) }},
		{"plugs-5", func(b *testing.B, mode string) *peer { return throughProxy(b, mode, 5) }},
	}
	for _, p := range peers {
		b.Run("throughput/"+p.name, func(b *testing.B) { benchFlood(b, p.start(b, "flood")) })
		b.Run("latency/"+p.name, func(b *testing.B) {
			pr := p.start(b, "raw")
			defer pr.end()
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := pr.in.Write(line); err != nil {
					b.Fatal(err)
				}
				if _, err := pr.out.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(t0))
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "µs/roundtrip-median")
		})
	}
}
