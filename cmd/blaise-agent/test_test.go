package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugtest"
	"github.com/rogpeppe/go-internal/diff"
)

// TestPlugTestExamples runs the tests of examples/ as CI does: every
// golden section must be there and hold.
func TestPlugTestExamples(t *testing.T) {
	t.Parallel()
	paths, err := plugtest.Find([]string{"../../examples/...", "../../internal/plugs/plugtest/testdata", "../../stdlib/testdata"})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("found %d tests, want the examples', plugtest's and stdlib's: %v", len(paths), paths)
	}
	opts := plugtest.Options{Self: self(t), CI: true}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			if strings.HasPrefix(filepath.Base(p), "sandbox") && !bwrapWorks() {
				t.Skip("blaise:sandbox needs bubblewrap, which is missing or cannot make namespaces here: see bwrap --unshare-all --ro-bind / / true")
			}
			f, err := plugtest.Parse(p)
			if err != nil {
				t.Fatal(err)
			}
			o, err := plugtest.Test(context.Background(), f, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, fail := range o.Failures {
				t.Errorf("%s:%d: %s\n%s", p, fail.Line, fail.Message, fail.Diff)
			}
		})
	}
}

// TestC15_PlugTestDeterministic: the same test gives byte-identical
// results run after run (the scripted agent, the chain and the
// normalisation leave nothing to chance): an example 20 times, the test of
// cancels and crashes 10 times, a plug failing mid-turn (M4) 20 times, the
// names of mkdtemp twice, a fork of a worktree (the order of its sessions'
// ids) 3 times. The runs after the first are subtests that run
// in parallel, each compared with the first: they run at the same time as
// each other and as other tests, which only adds to what may differ.
func TestC15_PlugTestDeterministic(t *testing.T) {
	t.Parallel()
	bin := self(t)
	for p, times := range map[string]int{
		"../../examples/worktree/session.blaisetest":                      20,
		"../../internal/plugs/plugtest/testdata/scripted.blaisetest":      10,
		"../../internal/plugs/plugtest/testdata/fail-mid-turn.blaisetest": 20,
		"../../internal/plugs/plugtest/testdata/mkdtemp.blaisetest":       2,
		"../../stdlib/testdata/worktree-fork.blaisetest":                  3,
	} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			f, err := plugtest.Parse(p)
			if err != nil {
				t.Fatal(err)
			}
			execute := func(t *testing.T) []byte {
				got, err := plugtest.Execute(context.Background(), f, bin)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				for _, name := range slices.Sorted(maps.Keys(got)) {
					b.WriteString("-- " + name + " --\n")
					b.Write(got[name])
				}
				return b.Bytes()
			}
			first := execute(t)
			for i := 2; i <= times; i++ {
				t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
					t.Parallel()
					if got := execute(t); !bytes.Equal(first, got) {
						t.Fatalf("%s: run %d differs from run 1:\n%s", p, i, diff.Diff("run 1", first, fmt.Sprintf("run %d", i), got))
					}
				})
			}
		})
	}
}

// BenchmarkPlugTest: the greeter's test (two runs, compared with its
// goldens) against its baseline, the same two runs through `run`.
func BenchmarkPlugTest(b *testing.B) {
	bin := self(b)
	cfg, err := filepath.Abs("../../examples/greeter/blaise.star")
	if err != nil {
		b.Fatal(err)
	}
	blaiseAgent := func(b *testing.B, env []string, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("blaise-agent %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	b.Run("baseline=run", func(b *testing.B) {
		for b.Loop() {
			env := []string{"BLAISE_STATE_DIR=" + b.TempDir(), "XDG_STATE_HOME=" + b.TempDir()}
			blaiseAgent(b, env, "run", "-c", cfg, "hello")
			blaiseAgent(b, env, "run", "-c", cfg, "--continue", "--end", "what is in the plan?")
		}
	})
	b.Run("test", func(b *testing.B) {
		for b.Loop() {
			blaiseAgent(b, []string{"CI=true"}, "test", filepath.Dir(cfg))
		}
	})
}
