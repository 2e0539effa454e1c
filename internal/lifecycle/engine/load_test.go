package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// TestL6_ALoadOfTheSessionAsItWasOpenedWritesNothing: a session/load of
// the agent's session with the cwd and mcpServers the record keeps (a
// resume's) leaves the record as it was, unwritten; one with another cwd
// is recorded once the agent has loaded it, for the next resume to load it
// so; one the agent refuses is not.
func TestL6_ALoadOfTheSessionAsItWasOpenedWritesNothing(t *testing.T) {
	store, clock, rec := runInProgress(t, func(r *lifecycle.Record) {
		r.ACPSessionID, r.CWD, r.MCPServers = "acp-1", "/work", []byte("[\n  ]")
	})
	live, proc := claimedRun(t, store, clock, rec)
	record := func() *lifecycle.Record {
		t.Helper()
		got, err := store.Session(t.Context(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// load sends a session/load in cwd and returns the record once the
	// agent's answer (result or error) has reached the front end.
	load := func(id int, cwd, answer string) (beforeAnswer, after *lifecycle.Record) {
		t.Helper()
		clock.Advance(time.Second)
		m, err := acp.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":"acp-1","cwd":%q,"mcpServers":[]}}`, id, cwd))
		if err != nil {
			t.Fatal(err)
		}
		if err := live.Send(m); err != nil {
			t.Fatal(err)
		}
		beforeAnswer = record()
		if _, err := fmt.Fprintf(proc.peerStdout, `{"jsonrpc":"2.0","id":%d,%s}`+"\n", id, answer); err != nil {
			t.Fatal(err)
		}
		for m := range live.Messages() {
			if string(m.ID) == fmt.Sprint(id) {
				break
			}
		}
		<-live.Noted() // written beside the answer
		return beforeAnswer, record()
	}
	before := record()
	if _, got := load(1, "/work", `"result":{}`); !got.Updated.Equal(before.Updated) {
		t.Errorf("the load as opened wrote the record: updated %v, was %v", got.Updated, before.Updated)
	}
	if _, got := load(2, "/refused", `"error":{"code":-32603,"message":"no"}`); got.CWD != "/work" || !got.Updated.Equal(before.Updated) {
		t.Errorf("a load the agent refused was recorded: cwd %q, updated %v (was %v)", got.CWD, got.Updated, before.Updated)
	}
	pending, got := load(3, "/elsewhere", `"result":{}`)
	if pending.CWD != "/work" {
		t.Errorf("the load elsewhere was recorded before the agent answered it: cwd %q", pending.CWD)
	}
	if got.CWD != "/elsewhere" || !got.Updated.After(before.Updated) {
		t.Errorf("the load elsewhere: cwd %q, updated %v (was %v)", got.CWD, got.Updated, before.Updated)
	}
}

// gatedStore holds UpdateSession at gate while it is armed, and logs each
// write that returns.
type gatedStore struct {
	lifecycle.Store
	armed  atomic.Bool
	gate   chan struct{}
	events chan string
}

func (s *gatedStore) UpdateSession(ctx context.Context, id string, f func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	if s.armed.Load() {
		<-s.gate
	}
	rec, err := s.Store.UpdateSession(ctx, id, f)
	s.events <- "written"
	return rec, err
}

// TestL6_AnOpenedSessionIsAnsweredBeforeItIsRecordedAndSpokenToAfter: the
// answer of a session/new reaches the front end while the agent's session
// id is still being written, and the client's next message reaches the
// agent only once that write is done: what the client was told is on
// record before anything is said in the session.
func TestL6_AnOpenedSessionIsAnsweredBeforeItIsRecordedAndSpokenToAfter(t *testing.T) {
	files, clock, rec := runInProgress(t, nil)
	store := &gatedStore{Store: files, gate: make(chan struct{}), events: make(chan string, 16)}
	live, proc := claimedRun(t, store, clock, rec)
	var release sync.Once
	open := func() { release.Do(func() { close(store.gate) }) }
	t.Cleanup(open) // first: a failure leaves no write held
	send := func(raw string) {
		t.Helper()
		m, err := acp.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := live.Send(m); err != nil {
			t.Error(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	if got := <-proc.lines; !strings.Contains(got, `"session/new"`) {
		t.Fatalf("the agent got %s", got)
	}
	store.armed.Store(true)
	if _, err := fmt.Fprintln(proc.peerStdout, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-9"}}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-live.Messages():
		if string(m.ID) != "1" {
			t.Fatalf("first message: %s", m.Raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer waited for the write of the agent's session id")
	}
	select {
	case <-live.Noted():
		t.Fatal("noted while its write is held")
	default:
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"acp-9","prompt":[]}}`)
	}()
	select {
	case got := <-proc.lines:
		t.Fatalf("the prompt reached the agent while the session's id was being written: %s", got)
	case <-time.After(100 * time.Millisecond): // were it not waiting, it would be there
	}
	open()
	<-sent
	got := <-proc.lines
	if ev := <-store.events; ev != "written" {
		t.Fatalf("event %s", ev)
	}
	if !strings.Contains(got, `"session/prompt"`) {
		t.Fatalf("the agent got %s", got)
	}
	after, err := files.Session(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.ACPSessionID != "acp-9" || after.CWD != "/work" {
		t.Fatalf("recorded: acp session %q, cwd %q", after.ACPSessionID, after.CWD)
	}
}

// claimedRun is the run in progress of rec, adopted by an engine of store
// and claimed, as a front end holds it, with a process of pipes; it ends
// with the test.
func claimedRun(t *testing.T, store lifecycle.Store, clock lifecycle.Clock, rec *lifecycle.Record) (*engine.Live, *pipeProcess) {
	t.Helper()
	e := &engine.Engine{Store: store, Clock: clock, AdoptUntil: clock.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	if _, err := e.Adopt(t.Context(), rec.ID, 1, proc); err != nil {
		t.Fatal(err)
	}
	live := e.Claim(rec.ID)
	if live == nil {
		t.Fatal("no run to claim")
	}
	t.Cleanup(func() {
		proc.end()
		if _, err := live.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return live, proc
}
