package sessionview

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestFollowReadsOnUntilTheRunEnds: with live, Lines waits for a transcript
// that does not exist yet, passes each line as it is completed (a
// half-written one only once its end is there), and returns once live
// reports the run over, after the last lines.
func TestFollowReadsOnUntilTheRunEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	var running atomic.Bool
	running.Store(true)
	live := func() (bool, error) { return running.Load(), nil }
	lines := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- Lines(context.Background(), path, live, func(b []byte) { lines <- string(b) })
	}()

	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"seq":1}` + "\n" + `{"seq":`)
	if got := <-lines; got != `{"seq":1}` {
		t.Fatalf("first line %q", got)
	}
	write("2}\n")
	if got := <-lines; got != `{"seq":2}` {
		t.Fatalf("second line %q", got)
	}
	// The run ends; its last record was written before it did.
	write(`{"seq":3}` + "\n")
	running.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(lines)
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if len(rest) != 1 || rest[0] != `{"seq":3}` {
		t.Errorf("after the run ended: %q, want the last record", rest)
	}
}
