package chain_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
)

// fixture is a configuration written to a temporary directory.
type fixture struct {
	t     *testing.T
	dir   string
	cfg   *interp.Config
	logs  *testsupport.Buffer
	log   *log.Logger
	store *builtins.MemStore
}

// newChain writes files (name → content) and loads blaise.star.
func newChain(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "$DIR", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testsupport.Buffer{}
	logger := log.NewWithOptions(logs, log.Options{Level: log.DebugLevel})
	cfg, err := chain.LoadConfig(filepath.Join(dir, "blaise.star"), logger)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return &fixture{t: t, dir: dir, cfg: cfg, logs: logs, log: logger, store: builtins.NewMemStore()}
}

// run starts a run; stop, when not nil, is sent once the agent wrote the
// file "$DIR/started" (or after wait).
func (c *fixture) run(opts chain.Options, stop *lifecycle.Stop) chain.Result {
	c.t.Helper()
	opts.Config = c.cfg
	opts.Logger = c.log
	if opts.Store == nil {
		opts.Store = c.store
	}
	if opts.SessionID == "" {
		opts.SessionID = "s1"
	}
	if opts.Kind == "" {
		opts.Kind = lifecycle.StartRun
	}
	opts.AgentGrace = 200 * time.Millisecond
	if opts.StopGrace == 0 {
		opts.StopGrace = 5 * time.Second
	}
	_ = os.Remove(filepath.Join(c.dir, "started"))
	r := chain.New(opts)
	done := make(chan chain.Result, 1)
	go func() { done <- r.Execute(context.Background()) }()
	if stop != nil {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(c.dir, "started")); err == nil {
				break
			}
			select {
			case res := <-done:
				return res
			case <-time.After(5 * time.Millisecond):
			}
		}
		r.Stop(*stop)
	}
	select {
	case res := <-done:
		return res
	case <-time.After(30 * time.Second):
		c.t.Fatal("the run did not end")
		return chain.Result{}
	}
}

// lines returns the logged messages that contain marker, in order.
func (c *fixture) lines(marker string) []string {
	var out []string
	for _, l := range strings.Split(c.logs.String(), "\n") {
		if i := strings.Index(l, marker); i >= 0 {
			out = append(out, strings.TrimSpace(l[i+len(marker):]))
		}
	}
	return out
}

// agentStarted is an agent that marks its start and waits for stdin to close.
const agentStarted = `agent(command = "sh", args = ["-c", "touch $DIR/started; cat >/dev/null"])
`

var idle = &lifecycle.Stop{Reason: "idle", MayResume: true}
var closed = &lifecycle.Stop{Reason: "closed", MayResume: false}

func tracer(name string) string {
	return `plug(name = "` + name + `")

def on_session(ctx, next):
    print("TRACE ` + name + ` before")
    info = next()
    print("TRACE ` + name + ` after", info.reason, info.may_resume)

def on_teardown(ctx, next):
    print("TRACE ` + name + ` restore")
    info = next()
    print("TRACE ` + name + ` destroy", info.reason)
`
}

func TestC1_PlugsNestInSetupOrder(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./b.star"), use("./c.star"))`,
		"a.star":      tracer("a"),
		"b.star":      tracer("b"),
		"c.star":      tracer("c"),
	})
	res := c.run(chain.Options{}, idle)
	want := []string{"a before", "b before", "c before", "c after idle True", "b after idle True", "a after idle True"}
	if got := c.lines("TRACE "); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
	if res.Pause == nil || res.Pause.Reason != "idle" || !res.Pause.MayResume || res.Teardown != nil {
		t.Fatalf("result %+v", res)
	}
}

func TestC2_ReturningWithoutNextFailsTheRun(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./lazy.star"))`,
		"a.star":      tracer("a"),
		"lazy.star": `plug(name = "lazy")
def on_session(ctx, next):
    pass
`,
	})
	res := c.run(chain.Options{IdlePolicy: lifecycle.PolicyPause}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "lazy.star:2:1: plug lazy: on_session: returned without calling next()") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if got := c.lines("TRACE "); strings.Join(got, "|") != "a before|a after failed True" {
		t.Fatalf("trace %q", got)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "started")); err == nil {
		t.Fatal("the agent started")
	}
}

func TestC2_NextTwiceFailsAtTheSecondCall(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./twice.star"))`,
		"twice.star": `plug(name = "twice")
def on_session(ctx, next):
    next()
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "failed" {
		t.Fatalf("pause %+v", res.Pause)
	}
	msg := res.Pause.Err.Error()
	for _, want := range []string{"twice.star:4:9: plug twice: on_session: next() called twice"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestC3_AgentCrashArrivesAsFailed(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "echo boom >&2; exit 3"])
setup(use("./a.star"))`,
		"a.star": tracer("a"),
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "the agent exited with code 3") || !strings.Contains(res.Pause.Err.Error(), "boom") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if got := c.lines("TRACE "); strings.Join(got, "|") != "a before|a after failed False|a restore|a destroy failed" {
		t.Fatalf("trace %q", got)
	}
	// Not resumable: the session is over, so the chain tears down.
	if res.Teardown == nil || res.Teardown.Reason != "failed" {
		t.Fatalf("teardown %+v", res.Teardown)
	}
}

func TestC3_AgentFailingToStartArrivesAsFailed(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "no-such-agent-binary")
setup(use("./a.star"))`,
		"a.star": tracer("a"),
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "the agent failed to start") || !strings.Contains(res.Pause.Err.Error(), "no-such-agent-binary") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC4_FailureBeforeNextSkipsInnerPlugsAndAgent(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./bad.star"), use("./c.star"))`,
		"a.star":      tracer("a"),
		"c.star":      tracer("c"),
		"bad.star": `plug(name = "bad")
def on_session(ctx, next):
    fail("no worktree")
    next()
`,
	})
	res := c.run(chain.Options{}, nil)
	// The session failed and cannot resume, so every plug with
	// on_teardown tears down, c included.
	if got := c.lines("TRACE "); strings.Join(got, "|") != "a before|a after failed False|a restore|c restore|c destroy failed|a destroy failed" {
		t.Fatalf("trace %q", got)
	}
	if !strings.Contains(res.Pause.Err.Error(), "bad.star:3:9: plug bad: on_session: no worktree") {
		t.Fatalf("error %q", res.Pause.Err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "started")); err == nil {
		t.Fatal("the agent started")
	}
}

func TestC4_FailureAfterNextStillRunsOuterPauseCode(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./bad.star"))`,
		"a.star":      tracer("a"),
		"bad.star": `plug(name = "bad")
def on_session(ctx, next):
    next()
    fail("cannot save")
`,
	})
	res := c.run(chain.Options{IdlePolicy: lifecycle.PolicyPause}, idle)
	if got := c.lines("TRACE "); strings.Join(got, "|") != "a before|a after failed True" {
		t.Fatalf("trace %q", got)
	}
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "cannot save") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC5_AgentWritableBeforeNextFrozenAfter(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "false")
setup(use("./shape.star"), use("./late.star"))`,
		"shape.star": `plug(name = "shape")
def on_session(ctx, next):
    ctx.agent.command = "sh"
    ctx.agent.args = ["-c", "echo $GREETING > $DIR/env; pwd > $DIR/cwd; touch $DIR/started; cat >/dev/null"]
    ctx.agent.env["GREETING"] = "hello"
    ctx.agent.cwd = "$DIR"
    next()
`,
		"late.star": `plug(name = "late")
def on_session(ctx, next):
    next()
    ctx.agent.command = "other"
`,
	})
	res := c.run(chain.Options{}, idle)
	if got, _ := os.ReadFile(filepath.Join(c.dir, "env")); string(got) != "hello\n" {
		t.Errorf("agent env: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(c.dir, "cwd")); strings.TrimSpace(string(got)) != c.dir {
		t.Errorf("agent cwd: %q", got)
	}
	want := "late.star:4:14: plug late: on_session: ctx.agent.command cannot change after next(): plug late already started the inner plugs and the agent"
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), want) {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC7_RunKindAndNumber(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./k.star"))`,
		"k.star": `plug(name = "k")
def on_session(ctx, next):
    print("RUN", ctx.run.kind, ctx.run.number)
    next()
def on_teardown(ctx, next):
    print("RUN", ctx.run.kind, ctx.run.number)
    next()
`,
	})
	c.run(chain.Options{Kind: lifecycle.StartRun, Number: 1}, idle)
	c.run(chain.Options{Kind: lifecycle.ResumeRun, Number: 2}, idle)
	c.run(chain.Options{Kind: lifecycle.TeardownRun, Number: 3, EndReason: "expired"}, nil)
	want := "start 1|resume 2|teardown 3"
	if got := strings.Join(c.lines("RUN "), "|"); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestC8_TeardownRunsOuterFirstOnlyWithOnTeardown(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./plain.star"), use("./c.star"))`,
		"a.star":      tracer("a"),
		"c.star":      tracer("c"),
		"plain.star": `plug(name = "plain")
def on_session(ctx, next):
    print("TRACE plain session")
    next()
`,
	})
	res := c.run(chain.Options{}, closed)
	want := "a before|plain session|c before|c after closed False|a after closed False|a restore|c restore|c destroy closed|a destroy closed"
	if got := strings.Join(c.lines("TRACE "), "|"); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if res.Teardown == nil || res.Teardown.Reason != "closed" || res.TeardownErr != nil {
		t.Fatalf("teardown %+v err %v", res.Teardown, res.TeardownErr)
	}
}

func TestC8_TeardownRunHasNoAgent(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	})
	res := c.run(chain.Options{Kind: lifecycle.TeardownRun, EndReason: "expired"}, nil)
	if got := strings.Join(c.lines("TRACE "), "|"); got != "a restore|a destroy expired" {
		t.Fatalf("trace %q", got)
	}
	if res.Pause != nil || res.Teardown.Reason != "expired" {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "started")); err == nil {
		t.Fatal("the agent started in a teardown run")
	}
}

func TestC8_InnerTeardownFailureArrivesAsFailed(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./bad.star"))`,
		"a.star":      tracer("a"),
		"bad.star": `plug(name = "bad")
def on_teardown(ctx, next):
    next()
    fail("rm failed")
`,
	})
	res := c.run(chain.Options{Kind: lifecycle.TeardownRun, EndReason: "closed"}, nil)
	if got := strings.Join(c.lines("TRACE "), "|"); got != "a restore|a destroy failed" {
		t.Fatalf("trace %q", got)
	}
	if res.TeardownErr == nil || !strings.Contains(res.TeardownErr.Error(), "rm failed") {
		t.Fatalf("teardown err %v", res.TeardownErr)
	}
}

const persistedPlug = `plug(
    name = "keeper",
    persisted = schema.object(count = schema.int()),
)

def on_load(ctx):
    v = ctx.persisted.value
    return {"count": v.count if v else 0}

def on_session(ctx, next):
    print("COUNT", ctx.state["count"], ctx.run.number)
    ctx.persisted.set({"count": ctx.state["count"] + 1})
    next()
`

func TestC9_OnLoadBuildsStateFromPersisted(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": persistedPlug,
	})
	c.run(chain.Options{Number: 1}, idle)
	c.run(chain.Options{Kind: lifecycle.ResumeRun, Number: 2}, idle)
	if got := strings.Join(c.lines("COUNT "), "|"); got != "0 1|1 2" {
		t.Fatalf("got %q", got)
	}
	data, ok, _ := c.store.Get(context.Background(), "s1", "k")
	if !ok || string(data) != `{"count":2}` {
		t.Fatalf("stored %q %v", data, ok)
	}
}

func TestC9_MigrateInvalidStoredValue(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": persistedPlug + `
def on_migrate(ctx, stored):
    return {"count": int(stored["n"])}
`,
	})
	_ = c.store.Set(context.Background(), "s1", "k", "keeper", []byte(`{"n": "41"}`))
	c.run(chain.Options{}, idle)
	if got := strings.Join(c.lines("COUNT "), "|"); got != "41 1" {
		t.Fatalf("got %q", got)
	}
}

func TestC9_MigrateToNoneDropsTheValue(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": persistedPlug + `
def on_migrate(ctx, stored):
    return None
`,
	})
	_ = c.store.Set(context.Background(), "s1", "k", "keeper", []byte(`"garbage"`))
	c.run(chain.Options{}, idle)
	if got := strings.Join(c.lines("COUNT "), "|"); got != "0 1" {
		t.Fatalf("got %q", got)
	}
}

func TestC9_InvalidStoredValueWithoutMigrateFails(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
		"keeper.star": persistedPlug,
	})
	_ = c.store.Set(context.Background(), "s1", "k", "keeper", []byte(`{"count": "many"}`))
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "no longer validates") || !strings.Contains(res.Pause.Err.Error(), "persisted.count") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if strings.Contains(c.logs.String(), "many") {
		t.Fatal("the persisted value appeared in the log (C11)")
	}
}

func TestC10_OutputsReachLaterPlugs(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(
    use("./wt.star", id = "wt"),
    use("./reader.star", inputs = {"branch": lambda s: s.setup["wt"].outputs.branch}),
)`,
		"wt.star": `plug(name = "wt")
def on_session(ctx, next):
    ctx.set_output("branch", "blaise/" + ctx.session.id)
    next()
`,
		"reader.star": `plug(name = "reader", inputs = schema.object(branch = schema.string()))
def on_session(ctx, next):
    print("OUT", ctx.inputs.branch, ctx.setup["wt"].outputs.branch)
    next()
`,
	})
	c.run(chain.Options{SessionID: "abc"}, idle)
	if got := strings.Join(c.lines("OUT "), "|"); got != "blaise/abc blaise/abc" {
		t.Fatalf("got %q", got)
	}
}

func TestC11_PersistedValueSizeIsLimited(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./big.star", id = "big"))`,
		"big.star": `plug(name = "big", persisted = schema.object(blob = schema.string()))
def on_session(ctx, next):
    ctx.persisted.set({"blob": "x" * 10000})
    next()
`,
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "persisted state is limited to 8192 bytes") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if _, ok, _ := c.store.Get(context.Background(), "s1", "big"); ok {
		t.Fatal("an oversized value was stored")
	}
}

func TestC12_UnresumableChainIsReportedAndWarnsWhenPaused(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./once.star"))`,
		"once.star": `plug(name = "once", resumable = False)
def on_session(ctx, next):
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Resumable {
		t.Fatal("reported resumable")
	}
	if res.Pause.Reason != "idle" || !res.Pause.MayResume || res.Teardown != nil {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(c.logs.String(), "pausing as asked, although a plug cannot resume") {
		t.Fatalf("no warning in %s", c.logs)
	}
}

func TestC14_InputsValidatedBeforeAnyHandler(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(
    use("./a.star"),
    use("./typed.star", inputs = {"n": lambda s: "three"}),
)`,
		"a.star": tracer("a"),
		"typed.star": `plug(name = "typed", inputs = schema.object(n = schema.int()))
def on_load(ctx):
    print("TRACE typed loaded")
def on_session(ctx, next):
    print("TRACE typed session")
    next()
`,
	})
	res := c.run(chain.Options{IdlePolicy: lifecycle.PolicyPause}, nil)
	if got := strings.Join(c.lines("TRACE "), "|"); got != "a before|a after failed True" {
		t.Fatalf("trace %q", got)
	}
	if !strings.Contains(res.Pause.Err.Error(), "plug typed: inputs.n: want int, got string") {
		t.Fatalf("error %q", res.Pause.Err)
	}
}

func TestC15_RunawayHandlerIsCancelledWhenStopped(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "true")
setup(use("./a.star"), use("./spin.star"))`,
		"a.star": tracer("a"),
		"spin.star": `plug(name = "spin")
def on_session(ctx, next):
    ctx.runner.fs.write_file("$DIR/started", "")
    while True:
        pass
`,
	})
	res := c.run(chain.Options{MaxSteps: 1 << 62, StopGrace: 100 * time.Millisecond}, &lifecycle.Stop{Reason: "timeout"})
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "plug spin: on_session: ") || !strings.Contains(res.Pause.Err.Error(), "cancelled: the run was stopped (timeout) and the handler did not reach next() within 100ms") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if got := strings.Join(c.lines("TRACE "), "|"); got != "a before|a after failed False|a restore|a destroy failed" {
		t.Fatalf("trace %q", got)
	}
}

// TestC15_AHandlerWaitingOnAHostCallIsCancelledWhenStopped: a handler
// that waits on a host command when the stop's grace runs out has the
// command cancelled, and the run fails saying why, as a runaway's does, not
// with the command's bare "context canceled".
func TestC15_AHandlerWaitingOnAHostCallIsCancelledWhenStopped(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "true")
setup(use("./slow.star"))`,
		"slow.star": `plug(name = "slow")
def on_session(ctx, next):
    ctx.runner.fs.write_file("$DIR/started", "")
    ctx.runner.exec(["sleep", "30"])
    next()
`,
	})
	res := c.run(chain.Options{StopGrace: 100 * time.Millisecond}, &lifecycle.Stop{Reason: "closed"})
	msg := res.Pause.Err.Error()
	if res.Pause.Reason != "failed" || !strings.Contains(msg, "plug slow: on_session: cancelled: the run was stopped (closed) and the handler did not reach next() within 100ms") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC15_StepLimitStopsRunaways(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./spin.star"))`,
		"spin.star": `plug(name = "spin")
def on_session(ctx, next):
    for i in range(1000000000):
        pass
`,
	})
	res := c.run(chain.Options{MaxSteps: 100000}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "stopped after 100000 steps") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC15_SameChainSameCalls(t *testing.T) {
	files := map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./b.star", id = "b", inputs = {"x": lambda s: s.run.kind}))`,
		"a.star":      tracer("a"),
		"b.star": `plug(name = "b", inputs = schema.object(x = schema.string()))
def on_session(ctx, next):
    print("TRACE b", ctx.inputs.x, ctx.plug.index, ctx.plug.id)
    ctx.set_output("o", 1)
    print("TRACE b", next())
`,
	}
	var first string
	for i := 0; i < 5; i++ {
		c := newChain(t, files)
		c.run(chain.Options{}, closed)
		got := strings.Join(c.lines("TRACE "), "|")
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("run %d differs:\n%s\n%s", i, got, first)
		}
	}
	if !strings.Contains(first, `b start 1 b|b PauseInfo(reason = "closed", may_resume = False, error = None)`) {
		t.Fatalf("trace %q", first)
	}
}

func TestBuiltins_CtxUsedAfterItsHandlerFails(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./leak.star"), use("./later.star"))`,
		"leak.star": `plug(name = "leak")
def on_load(ctx):
    return {"ctx": ctx}
def on_session(ctx, next):
    ctx.state["ctx"].log.info("hi")
    next()
`,
		"later.star": `plug(name = "later")`,
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "ctx of plug leak (on_load) used after its handler returned") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestH1_HostIsTheRealFileSystem(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./files.star"))`,
		"files.star": `plug(name = "files")
def on_session(ctx, next):
    ctx.host.fs.write_file("$DIR/made-by-plug", "hello")
    res = ctx.host.exec(["cat", "$DIR/made-by-plug"])
    print("CAT", res.stdout, res.code)
    next()
`,
	})
	c.run(chain.Options{}, idle)
	if got, _ := os.ReadFile(filepath.Join(c.dir, "made-by-plug")); string(got) != "hello" {
		t.Fatalf("file %q", got)
	}
	if got := strings.Join(c.lines("CAT "), "|"); got != "hello 0" {
		t.Fatalf("got %q", got)
	}
}

func TestL8_RunnerEnvHasNoBlaiseTokens(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./env.star"))`,
		"env.star": `plug(name = "env")
def on_session(ctx, next):
    print("ENV", sorted(ctx.runner_env.keys()))
    next()
`,
	})
	c.run(chain.Options{RunnerEnv: map[string]string{"HOME": "/h", "BLAISE_TOKEN": "secret", "BLAISE_RUNNER_KEY": "k", "BLAISE_LOG_LEVEL": "info"}}, idle)
	if got := strings.Join(c.lines("ENV "), "|"); got != `["BLAISE_LOG_LEVEL", "HOME"]` {
		t.Fatalf("got %q", got)
	}
}

func TestL8_ShellPlugSeesMayResumeAndEndReason(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("blaise:shell", inputs = {
    "attach": "echo attach $BLAISE_RUN_KIND >> $DIR/log",
    "pause": "echo pause $BLAISE_MAY_RESUME $BLAISE_END_REASON >> $DIR/log",
    "teardown": "echo teardown $BLAISE_MAY_RESUME $BLAISE_END_REASON >> $DIR/log",
}))`,
	})
	c.run(chain.Options{}, idle)
	c.run(chain.Options{Kind: lifecycle.ResumeRun, Number: 2}, closed)
	c.run(chain.Options{Kind: lifecycle.TeardownRun, Number: 3, EndReason: "expired"}, nil)
	got, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	want := "attach start\npause true idle\nattach resume\npause false closed\nteardown false closed\nteardown false expired\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestL8_ShellPlugScriptFailureFailsTheRun(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("blaise:shell", inputs = {"attach": "echo no >&2; exit 4"}))`,
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "attach script exited with code 4: no") {
		t.Fatalf("pause %+v", res.Pause)
	}
}

func TestC14_SeveralInputFunctionsAndTuples(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star", inputs = {
    "a": lambda s: s.run.kind,
    "b": lambda s: s.session.id,
    "c": (lambda s: "x", "y"),
}))`,
		"p.star": `plug(name = "p", inputs = schema.object(a = schema.string(), b = schema.string(), c = schema.list(schema.string())))
def on_session(ctx, next):
    print("IN", ctx.inputs.a, ctx.inputs.b, ctx.inputs.c)
    next()
`,
	})
	c.run(chain.Options{}, idle)
	if got := strings.Join(c.lines("IN "), "|"); got != `start s1 ["x", "y"]` {
		t.Fatalf("got %q", got)
	}
}

func TestC6_NextWithTheRunnerHostKeepsItOpen(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    next(host = ctx.runner)
    print("AFTER", ctx.runner.exec(["echo", "still open"]).stdout.strip())
`,
	})
	res := c.run(chain.Options{}, idle)
	if got := strings.Join(c.lines("AFTER "), "|"); got != "still open" || res.Pause.Reason != "idle" {
		t.Fatalf("got %q, pause %+v", got, res.Pause)
	}
}

func TestL8_ProcessesNeverSeeBlaiseTokens(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "echo agent=$BLAISE_TOKEN > $DIR/agent-env; touch $DIR/started; cat >/dev/null"])
setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    print("EXEC", ctx.host.exec(["sh", "-c", "echo exec=$BLAISE_TOKEN"]).stdout.strip())
    next()
`,
	})
	c.run(chain.Options{RunnerEnv: map[string]string{"PATH": os.Getenv("PATH"), "BLAISE_TOKEN": "secret"}}, idle)
	if got, _ := os.ReadFile(filepath.Join(c.dir, "agent-env")); string(got) != "agent=\n" {
		t.Errorf("agent env %q", got)
	}
	if got := strings.Join(c.lines("EXEC "), "|"); got != "exec=" {
		t.Errorf("exec env %q", got)
	}
}

func TestC11_PersistedValueNeverLogged(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star", id = "p"))`,
		"p.star": `plug(name = "p", persisted = schema.object(mode = schema.enum("a", "b")))
def on_session(ctx, next):
    ctx.persisted.set({"mode": "sk-very-secret"})
    next()
`,
	})
	res := c.run(chain.Options{}, nil)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), `persisted.mode: want one of "a", "b", got a string`) {
		t.Fatalf("pause %+v", res.Pause)
	}
	if strings.Contains(c.logs.String(), "sk-very-secret") || strings.Contains(res.Pause.Err.Error(), "sk-very-secret") {
		t.Fatal("the persisted value appeared in an error or the log")
	}
}

func TestC5_AgentReadOnlyOutsideOnSession(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_teardown(ctx, next):
    ctx.agent.cwd = "/"
    next()
`,
	})
	res := c.run(chain.Options{Kind: lifecycle.TeardownRun, EndReason: "closed"}, nil)
	if res.TeardownErr == nil || !strings.Contains(res.TeardownErr.Error(), "ctx.agent.cwd is read-only in on_teardown: shape the agent in on_session, before calling next()") {
		t.Fatalf("teardown err %v", res.TeardownErr)
	}
}

func TestC15_SignalAbortedWhenTheSessionShutsDown(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    print("SIGNAL before", ctx.signal.aborted, ctx.signal.reason)
    info = next()
    print("SIGNAL after", ctx.signal.aborted, ctx.signal.reason, info.reason)
`,
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := chain.New(chain.Options{Config: c.cfg, Logger: c.log, SessionID: "s", Kind: lifecycle.StartRun, AgentGrace: 200 * time.Millisecond})
	done := make(chan chain.Result, 1)
	go func() { done <- r.Execute(ctx) }()
	testsupport.Eventually(t, "the agent to start", func() bool {
		_, err := os.Stat(filepath.Join(c.dir, "started"))
		return err == nil
	})
	cancel()
	res := <-done
	want := "before False None|after True the session is shutting down failed"
	if got := strings.Join(c.lines("SIGNAL "), "|"); got != want || res.Pause.Reason != "failed" {
		t.Fatalf("got %q, pause %+v", got, res.Pause)
	}
}

func TestH1_ProcessesDoNotOutliveTheRun(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    proc = ctx.host.spawn(["sleep", "1000"])
    ctx.host.fs.write_file("$DIR/pid", str(proc.pid))
    next()
`,
	})
	c.run(chain.Options{}, idle)
	b, err := os.ReadFile(filepath.Join(c.dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if pid <= 0 {
		t.Fatalf("pid %q", b)
	}
	if testsupport.Alive(pid) {
		t.Fatalf("process %d spawned by a plug outlived the run", pid)
	}
}

func TestC3_FailureAfterAnEndingStopDoesNotResume(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./bad.star"))`,
		"bad.star": `plug(name = "bad")
def on_session(ctx, next):
    next()
    fail("cannot save")
`,
	})
	res := c.run(chain.Options{IdlePolicy: lifecycle.PolicyPause}, closed)
	if res.Pause.Reason != "failed" || res.Pause.MayResume || res.Teardown == nil {
		t.Fatalf("pause %+v teardown %+v", res.Pause, res.Teardown)
	}
}

// on_teardown, like on_session, must call next() exactly once (C2): not
// calling it, or calling it twice, fails the teardown with where and why,
// and the outer plug's info carries the error (C8).
func TestC2_TeardownWithoutNextOrTwiceFails(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"without", "    pass\n", "lazy.star:5:1: plug lazy: on_teardown: returned without calling next(); call next() exactly once"},
		{"twice", "    next()\n    next()\n", "lazy.star:7:9: plug lazy: on_teardown: next() called twice; call it exactly once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, map[string]string{
				"blaise.star": agentStarted + `setup(use("./outer.star"), use("./lazy.star"))`,
				"outer.star": `plug(name = "outer")
def on_session(ctx, next):
    return next()

def on_teardown(ctx, next):
    info = next()
    print("OUTER", info.reason, info.error)
`,
				"lazy.star": "plug(name = \"lazy\")\ndef on_session(ctx, next):\n    return next()\n\ndef on_teardown(ctx, next):\n" + tc.body,
			})
			res := c.run(chain.Options{Kind: lifecycle.TeardownRun, EndReason: "closed"}, nil)
			if res.TeardownErr == nil || !strings.Contains(res.TeardownErr.Error(), tc.want) {
				t.Fatalf("teardown err %v\nwant …%s", res.TeardownErr, tc.want)
			}
			if got := strings.Join(c.lines("OUTER "), "|"); !strings.HasPrefix(got, "failed ") || !strings.Contains(got, tc.want) {
				t.Fatalf("the outer plug saw %q", got)
			}
		})
	}
}

// Outputs last for the run that set them (C10): in the next run of the same
// session, a plug that sets nothing publishes nothing.
func TestC10_OutputsLastForTheRunOnly(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./wt.star", id = "wt"), use("./reader.star"))`,
		"wt.star": `plug(name = "wt")
def on_session(ctx, next):
    if ctx.run.kind == "start":
        ctx.set_output("branch", "blaise/" + ctx.session.id)
    next()
`,
		"reader.star": `plug(name = "reader")
def on_session(ctx, next):
    print("OUT", ctx.run.kind, ctx.setup["wt"].outputs.keys())
    next()
`,
	})
	c.run(chain.Options{SessionID: "abc"}, idle)
	c.run(chain.Options{SessionID: "abc", Kind: lifecycle.ResumeRun, Number: 2}, idle)
	if got := strings.Join(c.lines("OUT "), "|"); got != `start ["branch"]|resume []` {
		t.Fatalf("got %q", got)
	}
}

// What on_migrate returns is validated against the persisted schema, and
// written back when it is (C9).
func TestC9_MigratedValueIsValidatedAndWrittenBack(t *testing.T) {
	for _, tc := range []struct {
		name, migrated, want string
	}{
		{"valid", `{"count": int(stored["n"])}`, `{"count":41}`},
		{"invalid", `{"count": "forty-one"}`, "keeper.star:3:1: plug keeper: on_migrate: the migrated value does not validate: persisted.count: want int, got string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, map[string]string{
				"blaise.star": agentStarted + `setup(use("./keeper.star", id = "k"))`,
				"keeper.star": `plug(name = "keeper", persisted = schema.object(count = schema.int()))

def on_migrate(ctx, stored):
    return ` + tc.migrated + `

def on_session(ctx, next):
    next()
`,
			})
			_ = c.store.Set(context.Background(), "s1", "k", "keeper", []byte(`{"n": "41"}`))
			res := c.run(chain.Options{}, idle)
			stored, _, err := c.store.Get(context.Background(), "s1", "k")
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "valid" {
				if res.Pause.Reason != "idle" || string(stored) != tc.want {
					t.Fatalf("pause %+v, stored %s, want %s", res.Pause, stored, tc.want)
				}
				return
			}
			if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), tc.want) {
				t.Fatalf("pause %+v\nwant …%s", res.Pause, tc.want)
			}
			if string(stored) != `{"n": "41"}` {
				t.Fatalf("a migrated value that does not validate was stored: %s", stored)
			}
		})
	}
}

// A stop as cancelled, understood and not sent yet, does not resume (L4).
func TestL4_CancelledStopMayNotResumeAndTearsDown(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	})
	res := c.run(chain.Options{}, &lifecycle.Stop{Reason: "cancelled"})
	if res.Pause == nil || res.Pause.Reason != "cancelled" || res.Pause.MayResume || res.Teardown == nil || res.Teardown.Reason != "cancelled" {
		t.Fatalf("result %+v", res)
	}
	if got := strings.Join(c.lines("TRACE "), "|"); got != "a before|a after cancelled False|a restore|a destroy cancelled" {
		t.Fatalf("trace %q", got)
	}
}

// A pause that ends the session and cannot be reported still ends in a
// teardown; one that may resume does not (L7).
func TestL7_APauseThatCannotBeReportedStillTearsDown(t *testing.T) {
	for _, stop := range []*lifecycle.Stop{{Reason: "closed"}, idle} {
		t.Run(string(stop.Reason), func(t *testing.T) {
			c := newChain(t, map[string]string{
				"blaise.star": agentStarted + `setup(use("./a.star"))`,
				"a.star":      tracer("a"),
			})
			res := c.run(chain.Options{OnPause: func(builtins.PauseInfo) error { return errors.New("the control plane is gone") }}, stop)
			if res.ReportErr == nil || res.ReportErr.Error() != "the control plane is gone" {
				t.Fatalf("report error %v", res.ReportErr)
			}
			tornDown := strings.Contains(strings.Join(c.lines("TRACE "), "|"), "a destroy "+string(stop.Reason))
			if tornDown != !stop.MayResume || (res.Teardown != nil) != !stop.MayResume {
				t.Fatalf("may resume %v: trace %q, teardown %+v", stop.MayResume, c.lines("TRACE "), res.Teardown)
			}
		})
	}
}

// TestAgentChildHoldingItsOutputDoesNotHoldTheRun: a child that left the
// agent's process group and keeps its output open does not keep the run
// going until it exits.
func TestAgentChildHoldingItsOutputDoesNotHoldTheRun(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "setsid sh -c 'echo $$ > $DIR/child; touch $DIR/started; exec sleep 60' & cat >/dev/null"])
`,
	})
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(c.dir, "child")); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause == nil || res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v", res.Pause)
	}
}

// TestC1_OnAttachNamesEachPlugThenTheAgent: OnAttach hears each plug as its
// handlers start to attach, outermost first (C1), then "" as the agent
// starts; a plug's "before" code runs after it is named.
func TestC1_OnAttachNamesEachPlugThenTheAgent(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./a.star"), use("./b.star"))`,
		"a.star":      tracer("a"),
		"b.star":      tracer("b"),
	})
	var heard []string
	c.run(chain.Options{OnAttach: func(plug string) {
		heard = append(heard, plug+" after "+strings.Join(c.lines("TRACE "), ","))
	}}, idle)
	want := []string{"a after ", "b after a before", " after a before,b before"}
	if strings.Join(heard, "|") != strings.Join(want, "|") {
		t.Fatalf("heard %q, want %q", heard, want)
	}
}

// TestC5_AgentEnvAndArgsAfterNextSayWhy: changing ctx.agent.env or
// ctx.agent.args after next() gets the message a field gets, not
// Starlark's bare "frozen hash table"; a frozen global keeps Starlark's.
func TestC5_AgentEnvAndArgsAfterNextSayWhy(t *testing.T) {
	for _, tc := range []struct{ late, want string }{
		{`ctx.agent.env["X"] = "1"`, `late.star:5:18: plug late: on_session: ctx.agent.env cannot change after next(): plug late already started the inner plugs and the agent; set ctx.agent before calling next()`},
		{`ctx.agent.args.append("-v")`, `plug late: on_session: ctx.agent.args cannot change after next(): plug late already started`},
		{`FLAGS.append("-v")`, `plug late: on_session: append: cannot append to frozen list`},
	} {
		c := newChain(t, map[string]string{
			"blaise.star": agentStarted + `setup(use("./late.star"))`,
			"late.star": `plug(name = "late")
FLAGS = []
def on_session(ctx, next):
    next()
    ` + tc.late + `
`,
		})
		res := c.run(chain.Options{}, idle)
		if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), tc.want) {
			t.Errorf("%s: pause %+v, want an error holding %q", tc.late, res.Pause, tc.want)
		}
	}
}
