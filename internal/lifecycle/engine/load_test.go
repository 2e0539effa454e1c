package engine_test

import (
	"context"
	"fmt"
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
