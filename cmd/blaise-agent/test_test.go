package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blaiseagent/blaise-agent/plugtest"
	"github.com/rogpeppe/go-internal/diff"
)

// TestPlugTestExamples runs the tests of examples/ as CI does: every
// golden section must be there and hold.
func TestPlugTestExamples(t *testing.T) {
	paths, err := plugtest.Find([]string{"../../examples/...", "../../plugtest/testdata"})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("found %d tests, want the examples' and plugtest's: %v", len(paths), paths)
	}
	noRaceExitSleep(t)
	opts := plugtest.Options{Self: self(t), CI: true}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
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
// cancels and crashes 10 times.
func TestC15_PlugTestDeterministic(t *testing.T) {
	noRaceExitSleep(t)
	bin := self(t)
	for p, times := range map[string]int{"../../examples/worktree/session.blaisetest": 20, "../../plugtest/testdata/scripted.blaisetest": 10} {
		f, err := plugtest.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		var first []byte
		for i := range times {
			got, err := plugtest.Execute(context.Background(), f, bin)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			for _, name := range slices.Sorted(maps.Keys(got)) {
				b.WriteString("-- " + name + " --\n")
				b.Write(got[name])
			}
			if i == 0 {
				first = b.Bytes()
				continue
			}
			if !bytes.Equal(first, b.Bytes()) {
				t.Fatalf("%s: run %d differs from run 1:\n%s", p, i+1, diff.Diff("run 1", first, fmt.Sprintf("run %d", i+1), b.Bytes()))
			}
		}
	}
}

// noRaceExitSleep spares the session processes and agents of a race build
// the race detector's second of sleep at exit.
func noRaceExitSleep(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0")
}
