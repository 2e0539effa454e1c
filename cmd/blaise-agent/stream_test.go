package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/charmbracelet/log"
)

// TestL9_StreamReaderThatLeftNeverBlocksTheRun closes the client's side of
// Live.Stream while the agent streams far more than the pipes and the
// stream's queue hold: the run's messages are drained, so it still stops
// and settles as asked.
func TestL9_StreamReaderThatLeftNeverBlocksTheRun(t *testing.T) {
	t.Parallel()
	bin := self(t)
	dir, cfg := floodConfig(t, bin, 0)
	store, err := filestore.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	// A grace longer than the test: a blocked run is not failed for it.
	e := &engine.Engine{Store: store, Command: []string{bin, "session-process"}, TimeoutGrace: time.Hour, Stderr: io.Discard, Log: log.New(io.Discard)}
	live, err := e.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, w := live.Stream()
	out := bufio.NewReader(r)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, dir))
	send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"30000"}]}}`)
	// The answers to initialize and session/new, and the first update.
	for i := 0; i < 3; i++ {
		if _, err := out.ReadSlice('\n'); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	r.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("reading the closed stream: %v, want %v", err, io.ErrClosedPipe)
	}
	if err := live.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := live.Wait(ctx)
	if err != nil {
		t.Fatalf("the run did not end: %v", err)
	}
	if rec.State != lifecycle.TearingDown && rec.State != lifecycle.Ended {
		t.Fatalf("the session is %s, want it ended (closed)", rec.State)
	}
}
