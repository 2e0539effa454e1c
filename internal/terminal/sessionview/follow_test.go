package sessionview

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// TestServerLogFollowsWhatIsNewOnce: a server's transcript is written as
// it comes, with --json the records as stored; following it asks for what
// is new after the last chunk read, until the run has ended and once more.
func TestServerLogFollowsWhatIsNewOnce(t *testing.T) {
	chunks := []string{"{\"a\":1}\n{\"b\":2}\n", "{\"c\":3}\n", "{\"d\":4}\n"}
	var asked []int64
	polls := 0
	var out bytes.Buffer
	err := WriteLog(t.Context(), LogOptions{
		Out: &out, Err: io.Discard, ID: "s", Follow: true, Records: true,
		Server: func(_ context.Context, after int64) (io.ReadCloser, int64, error) {
			asked = append(asked, after)
			next := min(after+1, int64(len(chunks)))
			return io.NopCloser(strings.NewReader(strings.Join(chunks[after:next], ""))), next, nil
		},
		Live: func(context.Context) (bool, error) { polls++; return polls < 3, nil },
	})
	if err != nil || out.String() != strings.Join(chunks, "") {
		t.Fatalf("wrote %q, %v", out.String(), err)
	}
	if fmt.Sprint(asked) != "[0 1 2 3]" {
		t.Fatalf("asked after %v", asked)
	}
}
