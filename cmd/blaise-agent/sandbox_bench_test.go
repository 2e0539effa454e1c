package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSandboxStart measures what blaise:sandbox adds to starting the
// agent: a whole `blaise-agent run` of one prompt with the demo agent, alone
// and under the sandbox, one after the other in each iteration.
// x-agent-alone is the sandboxed time over the time alone.
func BenchmarkSandboxStart(b *testing.B) {
	if !bwrapWorks() {
		b.Skip("bubblewrap is missing or cannot make namespaces here: see bwrap --unshare-all --ro-bind / / true")
	}
	bin := self(b)
	dir := b.TempDir()
	configs := map[string]string{
		"alone.star":   `agent(command = BLAISE_AGENT, args = ["demo-agent"])`,
		"sandbox.star": `agent(command = BLAISE_AGENT, args = ["demo-agent"])` + "\n" + `setup(use("blaise:sandbox", id = "sandbox"))`,
	}
	for name, text := range configs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	run := func(config string) time.Duration {
		cmd := exec.Command(bin, "run", "-c", config, "--end", "hello")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BLAISE_STATE_DIR="+b.TempDir(), "XDG_STATE_HOME="+b.TempDir())
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("blaise-agent run -c %s: %v\n%s", config, err, out)
		}
		return time.Since(start)
	}
	var alone, sandboxed time.Duration
	for b.Loop() {
		alone += run("alone.star")
		sandboxed += run("sandbox.star")
	}
	b.ReportMetric(float64(alone.Milliseconds())/float64(b.N), "alone-ms/op")
	b.ReportMetric(float64(sandboxed.Milliseconds())/float64(b.N), "sandbox-ms/op")
	b.ReportMetric(float64(sandboxed)/float64(alone), "x-agent-alone")
}
