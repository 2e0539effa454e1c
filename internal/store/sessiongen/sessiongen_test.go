package sessiongen

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// The generated history is what the lifecycle leaves: the promised mix of
// states, valid ids, and nothing due before a day has passed.
func TestRecordsAreAtRestAndNotDueForADay(t *testing.T) {
	now := time.Now()
	recs := Records(1000, "demo", "gen", now)
	count := map[lifecycle.State]int{}
	ids := map[string]bool{}
	for _, r := range recs {
		count[r.State]++
		if err := lifecycle.CheckID("id", r.ID); err != nil || ids[r.ID] {
			t.Fatalf("id %q: %v (or twice)", r.ID, err)
		}
		ids[r.ID] = true
		if at, ok := lifecycle.DueAt(r); ok && at.Before(now.Add(24*time.Hour)) {
			t.Errorf("session %s (%s) is due at %v", r.ID, r.State, at)
		}
		if len(r.History) == 0 || r.Runs != r.History[len(r.History)-1].Run {
			t.Errorf("session %s: history %+v of %d runs", r.ID, r.History, r.Runs)
		}
	}
	want := map[lifecycle.State]int{lifecycle.Paused: 100, lifecycle.TearingDown: 10, lifecycle.Orphaned: 10, lifecycle.Ended: 880}
	for st, n := range want {
		if count[st] != n {
			t.Errorf("%d sessions %s, want %d (all: %v)", count[st], st, n, count)
		}
	}
}

// TestTranscriptIsReproducibleAndRendersWithoutErrors: the generated
// transcript is the same for the same seed, of about the size it says,
// and `sessions log` renders it without a line it cannot read.
func TestTranscriptIsReproducibleAndRendersWithoutErrors(t *testing.T) {
	var a, b bytes.Buffer
	if err := Transcript(&a, 2000, 1); err != nil {
		t.Fatal(err)
	}
	Transcript(&b, 2000, 1)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two transcripts of the same seed differ")
	}
	if size := a.Len(); size < 2000*800 || size > 2000*2000 {
		t.Fatalf("%d bytes for 2,000 updates", size)
	}
	var out, errs bytes.Buffer
	l := &sessionview.Log{Term: &client.Terminal{Out: &out, Err: &errs}, Err: &errs}
	for line := range bytes.Lines(a.Bytes()) {
		l.Record(bytes.TrimSuffix(line, []byte("\n")))
	}
	if errs.Len() > 0 || !strings.Contains(out.String(), "Run the tests") {
		t.Fatalf("rendered with errors:\n%.2000s\n%.2000s", errs.String(), out.String())
	}
}
