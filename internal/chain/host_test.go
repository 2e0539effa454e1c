package chain_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/stdlib"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
)

// trackedHost is a local host in its own workspace that records what
// happens to it: a second host without a transport.
type trackedHost struct {
	*hosts.Local
	mu      sync.Mutex
	events  []string
	spawned []string
}

func (h *trackedHost) note(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *trackedHost) Exec(ctx context.Context, argv []string, o hosts.ExecOptions) (hosts.ExecResult, error) {
	h.note("exec " + strings.Join(argv, " "))
	return h.Local.Exec(ctx, argv, o)
}

func (h *trackedHost) Spawn(ctx context.Context, s hosts.SpawnSpec) (hosts.Process, error) {
	h.note("spawn " + filepath.Base(s.Argv[0]))
	return h.Local.Spawn(ctx, s)
}

func (h *trackedHost) Close() error {
	h.note("close")
	return h.Local.Close()
}

// loadWithHost loads files with an extra builtin second_host() that
// returns h, as a plug providing a host would.
func loadWithHost(t *testing.T, files map[string]string, h hosts.Host) *fixture {
	t.Helper()
	c := newChain(t, map[string]string{"blaise.star": `agent(command = "true")`})
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(strings.ReplaceAll(content, "$DIR", c.dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	predeclared := starlark.StringDict{"second_host": starlark.NewBuiltin("second_host", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return builtins.NewHost(h, "second"), nil
	})}
	for k, v := range builtins.Predeclared {
		predeclared[k] = v
	}
	l := &interp.Loader{Stdlib: stdlib.FS, Predeclared: predeclared, Print: func(string, string) {}}
	cfg, err := l.LoadConfig(filepath.Join(c.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	c.cfg = cfg
	c.log = log.NewWithOptions(c.logs, log.Options{Level: log.DebugLevel})
	return c
}

func TestC6_NextWithHostRunsInnerPlugsAndAgentThereThenClosesIt(t *testing.T) {
	workspace := t.TempDir()
	far := &trackedHost{Local: hosts.NewLocal(hosts.LocalOptions{Workspace: workspace})}
	c := loadWithHost(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "touch $DIR/started; cat >/dev/null"])
setup(use("./switch.star"), use("./inner.star"))`,
		"switch.star": `plug(name = "switch")
def on_session(ctx, next):
    info = next(host = second_host())
    print("HOST outer", info.reason)
`,
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    print("HOST inner", ctx.host.exec(["pwd"]).stdout.strip())
    next()
`,
	}, far)
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v", res.Pause)
	}
	if got := strings.Join(c.lines("HOST "), "|"); got != "inner "+workspace+"|outer idle" {
		t.Fatalf("got %q", got)
	}
	if got := strings.Join(far.events, "|"); got != "exec pwd|spawn sh|close" {
		t.Fatalf("the second host saw %q", got)
	}
}

// TestC13_PlugCodeRunsInTheRunnerEffectsOnTheHost: the handlers of a plug
// inside a host switch run in the runner's process; only its calls reach
// the host.
func TestC13_PlugCodeRunsInTheRunnerEffectsOnTheHost(t *testing.T) {
	workspace := t.TempDir()
	far := &trackedHost{Local: hosts.NewLocal(hosts.LocalOptions{Workspace: workspace})}
	c := loadWithHost(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "touch $DIR/started; cat >/dev/null"])
setup(use("./switch.star"), use("./inner.star"))`,
		"switch.star": `plug(name = "switch")
def on_session(ctx, next):
    next(host = second_host())
`,
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    ctx.host.fs.write_file("made-on-host", "x")
    print("PID", ctx.runner.exec(["sh", "-c", "echo $PPID"]).stdout.strip())
    next()
`,
	}, far)
	c.run(chain.Options{}, idle)
	if _, err := os.Stat(filepath.Join(workspace, "made-on-host")); err != nil {
		t.Fatalf("the effect did not happen on the host: %v", err)
	}
	if got := strings.Join(c.lines("PID "), "|"); got != strconvItoa(os.Getpid()) {
		t.Fatalf("the inner plug's code ran in process %s, not the runner's %d", got, os.Getpid())
	}
}

func strconvItoa(i int) string { return strconv.Itoa(i) }
