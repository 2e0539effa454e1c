package chain_test

import (
	"context"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// forkPlug copies half of what the session forked counted, and says what
// it sees of the fork.
const forkPlug = `plug(name = "keeper", persisted = schema.object(count = schema.int()))

def on_session(ctx, next):
    parent = ctx.persisted.parent
    print("FORK", ctx.session.forked_from, ctx.run.kind, parent.count if parent else None, ctx.persisted.value)
    if parent and ctx.persisted.value == None:
        ctx.persisted.set({"count": parent.count // 2})
    next()
`

func TestAForksStartRunSeesItsParentsPersistedValueReadOnly(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": forkPlug,
	})
	ctx := context.Background()
	_ = c.store.Set(ctx, "parent", "k", "keeper", []byte(`{"count":8}`))
	c.run(chain.Options{SessionID: "fork", ForkedFrom: "parent"}, idle)
	c.run(chain.Options{SessionID: "fork", ForkedFrom: "parent", Kind: lifecycle.ResumeRun, Number: 2}, idle)
	c.run(chain.Options{SessionID: "other"}, idle)
	want := `parent start 8 None|parent resume None record(count = 4)|None start None None`
	if got := strings.Join(c.lines("FORK "), "|"); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if data, _, _ := c.store.Get(ctx, "parent", "k"); string(data) != `{"count":8}` {
		t.Fatalf("the parent's value changed: %s", data)
	}
	if data, _, _ := c.store.Get(ctx, "fork", "k"); string(data) != `{"count":4}` {
		t.Fatalf("the fork's value: %s", data)
	}
}

func TestAForksParentValueThatNoLongerValidatesIsNoneWithAWarning(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": forkPlug,
	})
	_ = c.store.Set(context.Background(), "parent", "k", "keeper", []byte(`{"n":"old"}`))
	res := c.run(chain.Options{SessionID: "fork", ForkedFrom: "parent"}, idle)
	if res.Pause == nil || res.Pause.Reason == lifecycle.Failed {
		t.Fatalf("the run failed: %+v", res.Pause)
	}
	if got := strings.Join(c.lines("FORK "), "|"); got != "parent start None None" {
		t.Fatalf("got %q", got)
	}
	if !strings.Contains(c.logs.String(), "does not validate; ctx.persisted.parent is None") {
		t.Fatalf("no warning in:\n%s", c.logs)
	}
}
