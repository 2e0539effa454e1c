package acp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
)

// The records of a stream are written in the background, and a request's
// or response's record is written before Record returns, after every
// record before it: a transcript is current at each turn, in order (M5).
func TestM5_TranscriptHoldsEveryRecordBeforeATurnsAnswer(t *testing.T) {
	out := &testsupport.Buffer{}
	r := NewJSONLRecorder(out)
	update := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 1000) + `"}}`))
	n := 3*recordBatch/len(update.Raw) + 1 // a few background writes
	for range n {
		r.Record(ToClient, update, "")
	}
	r.Record(ToClient, mustParse([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)), "")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("the transcript has %d records once the answer is recorded, want %d", len(lines), n+1)
	}
	for i, line := range lines {
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if rec.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i+1, rec.Seq)
		}
	}
	if !bytes.Contains([]byte(lines[n]), []byte(`"kind":"response"`)) {
		t.Errorf("the last record is %.100s, want the answer", lines[n])
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// gatedWriter holds its first Write until open is closed.
type gatedWriter struct {
	testsupport.Buffer
	started, open chan struct{}
	first         bool
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	if !g.first {
		g.first = true
		close(g.started)
		<-g.open
	}
	return g.Buffer.Write(p)
}

// A stream's records wait for no write to the file: while the file takes a
// batch, the next records gather (M5 records everything, at no cost to the
// stream's pace).
func TestM5_StreamedRecordsDoNotWaitForTheFile(t *testing.T) {
	g := &gatedWriter{started: make(chan struct{}), open: make(chan struct{})}
	r := NewJSONLRecorder(g)
	update := mustParse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 1000) + `"}}`))
	n := 2 * recordBatch / len(update.Raw)
	for range n {
		r.Record(ToClient, update, "")
	}
	<-g.started // a batch is being written, and held
	close(g.open)
	r.Record(ToClient, mustParse([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)), "")
	if got := strings.Count(g.String(), "\n"); got != n+1 {
		t.Errorf("the transcript has %d records, want %d", got, n+1)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
