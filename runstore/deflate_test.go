package runstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/klauspost/compress/flate"
)

// keepsDeflated is a store whose transcripts take deflated lines, as the
// server's store does; it notes the size of each chunk it got so.
type keepsDeflated struct {
	session.RunStore
	chunks []int
}

func (s *keepsDeflated) Transcript(id string) (io.WriteCloser, error) {
	w, err := s.RunStore.Transcript(id)
	return deflatedWriter{w, s}, err
}

type deflatedWriter struct {
	io.WriteCloser
	s *keepsDeflated
}

func (w deflatedWriter) WriteDeflated(p []byte) error {
	w.s.chunks = append(w.s.chunks, len(p))
	lines, err := io.ReadAll(flate.NewReader(bytes.NewReader(p)))
	if err == nil {
		_, err = w.Write(lines)
	}
	return err
}

// records are n bytes or more of transcript lines.
func records(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"seq":%d,"message":{"text":"%s"}}`+"\n", i, strings.Repeat("x", 200))
	}
	return b.String()
}

// Issue 13: a transcript's bulk leaves the run deflated and reaches a store
// that keeps it so as it was sent, a fraction of its size; a small write,
// or one that does not end a line, leaves as it is, and so does the write
// after a line not ended. A store that takes no deflated lines gets them
// inflated. Either way the transcript holds every line, in order.
func TestIssue13_TranscriptBulkLeavesDeflated(t *testing.T) {
	bulk, half := records(deflateMin), records(deflateMin)
	writes := []string{"{\"turn\":1}\n", bulk, half[:len(half)-10], half[len(half)-10:], bulk}
	for _, keeps := range []bool{true, false} {
		t.Run(fmt.Sprintf("keeps-deflated=%v", keeps), func(t *testing.T) {
			files, id := newStore(t)
			store := session.RunStore(files)
			deflating := &keepsDeflated{RunStore: files}
			if keeps {
				store = deflating
			}
			var failed error
			c := pair(t, store, id, &failed)
			w, _ := c.Transcript(id)
			for _, p := range writes {
				if _, err := io.WriteString(w, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := files.ReadTranscript(id)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if want := strings.Join(writes, ""); string(got) != want {
				t.Fatalf("the transcript has %d bytes, want the %d written, in order", len(got), len(want))
			}
			if !keeps {
				return
			}
			// The bulk, twice; not the write after the line not ended.
			if len(deflating.chunks) != 2 || deflating.chunks[0] >= len(bulk)/4 {
				t.Fatalf("the store got deflated chunks of %v bytes, want 2 of the %d-byte bulk, a fraction of it", deflating.chunks, len(bulk))
			}
		})
	}
}

// Issue 13: a store that takes no deflated lines gets them inflated,
// every stream of an append; deflated lines that do not inflate are
// refused, with an error that says so, and so is every later write of the
// run, as after any failed append.
func TestIssue13_DeflatedLinesThatDoNotInflateAreRefused(t *testing.T) {
	store, id := newStore(t)
	a, b := net.Pipe()
	srv := &Server{Store: store, Session: id}
	go srv.Serve(context.Background(), b)
	t.Cleanup(func() { a.Close() })
	w, r := bufio.NewWriter(a), bufio.NewReader(a)
	call := func(req request, data []byte) response {
		t.Helper()
		req.Size = len(data)
		sent := make(chan error, 1) // a pipe's writes wait for its reads
		go func() {
			writeFrame(w, req, data)
			sent <- w.Flush()
		}()
		var resp response
		if _, err := readData(r, &resp, func() int { return resp.Size }); err != nil {
			t.Fatal(err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Two streams, one after the other, as a batch of appends has them.
	var packed bytes.Buffer
	for _, line := range []string{"{\"a\":1}\n", "{\"b\":2}\n"} {
		fw, _ := flate.NewWriter(&packed, flate.BestSpeed)
		io.WriteString(fw, line)
		fw.Close()
	}
	if resp := call(request{ID: 1, Op: OpAppend, Session: id, Deflated: true}, packed.Bytes()); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	resp := call(request{ID: 2, Op: OpAppend, Session: id, Deflated: true}, []byte("not deflate"))
	testsupport.WantErr(t, resp.err(request{Session: id}), "deflated lines that do not inflate")
	resp = call(request{ID: 3, Op: OpPaused, Session: id, Pause: &session.PauseRecord{Reason: session.Idle, At: time.Now(), Run: 1}}, nil)
	testsupport.WantErr(t, resp.err(request{Session: id}), "a transcript append failed before", "do not inflate")
	if rec, err := store.Session(id); err != nil || rec.State != session.Active {
		t.Fatalf("the refused pause changed the session: %+v, %v", rec, err)
	}
	tr, err := store.ReadTranscript(id)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got, _ := io.ReadAll(tr); string(got) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("the transcript has %q, want the lines of both streams", got)
	}
}
