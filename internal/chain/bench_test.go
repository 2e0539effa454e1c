package chain_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/charmbracelet/log"
)

// tenPlugs writes a configuration of ten no-op plugs around agent.
func tenPlugs(b *testing.B, agent string) string {
	dir := b.TempDir()
	var uses []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("p%d.star", i)
		src := fmt.Sprintf(`plug(name = "noop%d", inputs = schema.object(n = schema.int(default = %d), tags = schema.list(schema.string(), default = [])))
def on_session(ctx, next):
    next()
def on_teardown(ctx, next):
    next()
`, i, i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		uses = append(uses, fmt.Sprintf(`use("./%s", id = "p%d", inputs = {"n": %d, "tags": ["a", "b"]})`, name, i, i))
	}
	cfg := fmt.Sprintf("agent(command = %q)\nsetup(%s)\n", agent, strings.Join(uses, ",\n"))
	path := filepath.Join(dir, "blaise.star")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkChain compares a run of ten no-op plugs from start to pause with
// spawning the same agent command alone. The agent is `true`, which exits
// at once, so the run pauses as failed; the pause policy keeps teardown out.
func BenchmarkChain(b *testing.B) {
	agent, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true")
	}
	b.Run("agent-alone", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(agent).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ten-noop-plugs", func(b *testing.B) {
		logger := log.New(io.Discard)
		cfg, err := chain.LoadConfig(tenPlugs(b, agent), logger)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			res := chain.New(chain.Options{Config: cfg, SessionID: "s", Kind: lifecycle.StartRun, Logger: logger, IdlePolicy: lifecycle.PolicyPause}).Execute(context.Background())
			if res.Pause == nil || res.Pause.Reason != "failed" || res.Teardown != nil {
				b.Fatalf("result %+v", res)
			}
		}
	})
}

// BenchmarkLoadTenPlugs measures loading and validating a configuration of
// ten plugs.
func BenchmarkLoadTenPlugs(b *testing.B) {
	path := tenPlugs(b, "true")
	logger := log.New(io.Discard)
	for b.Loop() {
		if _, err := chain.LoadConfig(path, logger); err != nil {
			b.Fatal(err)
		}
	}
}
