package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/acptest"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestIssue12_PipelineStepsCostNoAllocation checks that a plug's step of a
// message allocates nothing beyond the Starlark call of its handler: the
// steps of a message are allocated together (issue 12, throughput with
// plugs).
func TestIssue12_PipelineStepsCostNoAllocation(t *testing.T) {
	perMessage := func(plugs int) float64 {
		pl := loadedPipeline(t, plugs)
		m, err := acp.Parse([]byte(acptest.Update1KiB))
		if err != nil {
			t.Fatal(err)
		}
		forward := func(*acp.Message) *acp.Message { return nil }
		return testing.AllocsPerRun(200, func() {
			if _, _, err := pl.Handle(acp.ToClient, m, forward); err != nil {
				t.Fatal(err)
			}
		})
	}
	// What Starlark allocates for a call of a handler like the plugs':
	// its frame, and the arguments it passes to next (a builtin).
	thread := new(starlark.Thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "h.star", "def h(ctx, message, next):\n    return next(message)\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	next := starlark.NewBuiltin("next", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	})
	args := starlark.Tuple{starlark.None, starlark.None, next}
	call := testing.AllocsPerRun(200, func() {
		if _, err := starlark.Call(thread, globals["h"], args, nil); err != nil {
			t.Fatal(err)
		}
	})
	one, five := perMessage(1), perMessage(5)
	if extra := five - one; extra > 4*call {
		t.Errorf("a message allocates %v times through 5 plugs and %v through 1: %v per plug more, of which Starlark's call is %v", five, one, extra/4, call)
	}
}

// BenchmarkPipeline measures what the plugs cost a message, in the
// process and without pipes: a 1 KiB session/update through 1 and 5 no-op
// on_message plugs to a forward that takes it.
func BenchmarkPipeline(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("plugs-%d", n), func(b *testing.B) {
			pl := loadedPipeline(b, n)
			m, err := acp.Parse([]byte(acptest.Update1KiB))
			if err != nil {
				b.Fatal(err)
			}
			forwarded := 0
			forward := func(*acp.Message) *acp.Message { forwarded++; return nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := pl.Handle(acp.ToClient, m, forward); err != nil {
					b.Fatal(err)
				}
			}
			if forwarded != b.N {
				b.Fatalf("forwarded %d messages of %d", forwarded, b.N)
			}
		})
	}
}

// loadedPipeline returns the pipeline of a run of n no-op plugs, loaded as
// a run loads them before its agent starts.
func loadedPipeline(b testing.TB, n int) *pipeline {
	dir := b.TempDir()
	cfgPath := filepath.Join(dir, "blaise.star")
	src := fmt.Sprintf("agent(command = \"true\")\nsetup(%s)\n", strings.Join(acptest.NoopPlugs(b, dir, n), ", "))
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	logger := log.New(io.Discard)
	cfg, err := LoadConfig(cfgPath, logger)
	if err != nil {
		b.Fatal(err)
	}
	r := New(Options{Config: cfg, SessionID: "bench", Kind: session.StartRun, Logger: logger})
	r.shutdown, r.ctx = context.Background(), context.Background()
	host := hosts.NewLocal(hosts.LocalOptions{})
	b.Cleanup(func() { _ = host.Close() })
	r.runnerHost = host
	r.hostValues[host] = builtins.NewHost(host, "runner")
	for _, p := range r.plugs {
		if err := r.load(p, host); err != nil {
			b.Fatal(err)
		}
	}
	return r.pipeline(host)
}
