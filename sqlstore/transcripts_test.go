package sqlstore

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/blaiseagent/blaise-agent/sqlstore/storetest"
	"github.com/klauspost/compress/flate"
)

// deflated is lines as a run deflates them, repeated n times.
func deflated(t *testing.T, lines string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed)
	for range n {
		io.WriteString(w, lines)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads a transcript to its end, and returns its first 100 bytes.
func readAll(t *testing.T, s *Store, id string) (string, error) {
	t.Helper()
	r, err := s.ReadTranscript(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var head bytes.Buffer
	_, err = io.Copy(io.Discard, io.TeeReader(r, writerFunc(func(p []byte) (int, error) {
		head.Write(p[:min(len(p), max(0, 100-head.Len()))])
		return len(p), nil
	})))
	return head.String(), err
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Issue 13: lines a run deflated (deflate streams one after the other)
// are stored as they come, in order with the lines written plainly, and
// read back as lines; they may not follow a line not ended.
func TestIssue13_DeflatedLinesStoredAsTheyCome(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		w, err := s.Transcript("s")
		if err != nil {
			t.Fatal(err)
		}
		d := w.(session.DeflatedTranscript)
		io.WriteString(w, "{\"a\":1}\n")
		// Two streams, one after the other, as a batch of appends has them.
		if err := d.WriteDeflated(append(deflated(t, "{\"b\":2}\n", 1), deflated(t, "{\"c\":3}\n", 1)...)); err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, `{"d":`)
		testsupport.WantErr(t, d.WriteDeflated(deflated(t, "{\"e\":5}\n", 1)), "session s", "deflated lines after a line not ended")
		io.WriteString(w, "4}\n")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		testsupport.WantErr(t, d.WriteDeflated(deflated(t, "{\"f\":6}\n", 1)), "closed")
		got, err := readAll(t, s, "s")
		if err != nil {
			t.Fatal(err)
		}
		if want := "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n"; got != want {
			t.Errorf("transcript %q, want %q", got, want)
		}
		lines, _, err := s.TranscriptAfter("s", 0)
		if err != nil || string(lines) != got {
			t.Errorf("TranscriptAfter: %q, %v; want %q", lines, err, got)
		}
	})
}

// Issue 13: a chunk that does not inflate, or inflates without end (a
// runner's deflated bytes are stored unread), ends the reading of the
// transcript with an error that names the session, after the lines
// before it (and, streamed, what came of the chunk before its end).
func TestIssue13_BadDeflatedChunkEndsTheTranscriptWithAnError(t *testing.T) {
	s := open(t, databases[0].dsn(t), newKey())
	for _, c := range []struct {
		id, want string
		chunk    []byte
	}{
		{"garbage", "does not inflate", []byte("not deflate")},
		{"bomb", "deflate stream inflates to more than", deflated(t, strings.Repeat("x", 1<<20), maxChunk>>20+1)},
	} {
		storetest.Create(t, s, c.id)
		w, _ := s.Transcript(c.id)
		io.WriteString(w, "{\"a\":1}\n")
		if err := w.(session.DeflatedTranscript).WriteDeflated(c.chunk); err != nil {
			t.Fatal(err)
		}
		w.Close()
		got, err := readAll(t, s, c.id)
		testsupport.WantErr(t, err, "session "+c.id, c.want)
		if !strings.HasPrefix(got, "{\"a\":1}\n") || strings.Contains(got, "{\"b\"") {
			t.Errorf("%s: read %.100q before the bad chunk", c.id, got)
		}
	}
}
