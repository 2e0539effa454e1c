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
// is recorded, for the next resume to load it so.
func TestL6_ALoadOfTheSessionAsItWasOpenedWritesNothing(t *testing.T) {
	store, clock, rec := runInProgress(t, func(r *lifecycle.Record) {
		r.ACPSessionID, r.CWD, r.MCPServers = "acp-1", "/work", []byte("[\n  ]")
	})
	e := &engine.Engine{Store: store, Clock: clock, AdoptUntil: clock.Now().Add(time.Minute)}
	proc := newPipeProcess(t)
	live, err := e.Adopt(t.Context(), rec.ID, 1, proc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.end()
		if _, err := live.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	load := func(id int, cwd string) *lifecycle.Record {
		t.Helper()
		clock.Advance(time.Second)
		m, err := acp.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":"acp-1","cwd":%q,"mcpServers":[]}}`, id, cwd))
		if err != nil {
			t.Fatal(err)
		}
		if err := live.Send(m); err != nil {
			t.Fatal(err)
		}
		got, err := store.Session(t.Context(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before, err := store.Session(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := load(1, "/work"); !got.Updated.Equal(before.Updated) {
		t.Errorf("the load as opened wrote the record: updated %v, was %v", got.Updated, before.Updated)
	}
	if got := load(2, "/elsewhere"); got.CWD != "/elsewhere" || !got.Updated.After(before.Updated) {
		t.Errorf("the load elsewhere: cwd %q, updated %v (was %v)", got.CWD, got.Updated, before.Updated)
	}
}
