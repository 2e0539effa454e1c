package runstore

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"

	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/klauspost/compress/flate"
)

// TestDeflatedLinesThatDoNotInflateAreRefused: the lines of an append that
// an earlier runner sent deflated reach the store inflated, every stream of
// the append; deflated lines that do not inflate are refused, with an error
// that says so, and so is every later write of the run, as after any failed
// append.
func TestDeflatedLinesThatDoNotInflateAreRefused(t *testing.T) {
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
	resp = call(request{ID: 3, Op: OpPaused, Session: id, Pause: &lifecycle.PauseRecord{Reason: lifecycle.Idle, At: time.Now(), Run: 1}}, nil)
	testsupport.WantErr(t, resp.err(request{Session: id}), "a transcript append failed before", "do not inflate")
	if rec, err := store.Session(t.Context(), id); err != nil || rec.State != lifecycle.Active {
		t.Fatalf("the refused pause changed the session: %+v, %v", rec, err)
	}
	tr, err := store.ReadTranscript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got, _ := io.ReadAll(tr); string(got) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("the transcript has %q, want the lines of both streams", got)
	}
}

// TestDeflatedLinesAreBoundedInAll: what an append's deflate streams inflate
// to is bounded in all, as an append sent as it is: streams that each stay
// within the bound but together pass it are refused, not held in memory.
func TestDeflatedLinesAreBoundedInAll(t *testing.T) {
	var one bytes.Buffer
	fw, _ := flate.NewWriter(&one, flate.BestSpeed)
	fw.Write(make([]byte, 1<<20))
	fw.Close()
	if lines, err := inflate(bytes.Repeat(one.Bytes(), 3)); err != nil || len(lines) != 3<<20 {
		t.Fatalf("three streams of 1 MiB: %d bytes, %v", len(lines), err)
	}
	_, err := inflate(bytes.Repeat(one.Bytes(), maxData>>20+1))
	testsupport.WantErr(t, err, "deflated lines of more than")
}
