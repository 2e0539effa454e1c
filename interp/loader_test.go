package interp_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/interp"
)

// load writes files into a temporary directory, changes into it so that
// messages show short paths, and loads blaise.star.
func load(t *testing.T, files map[string]string) (*interp.Config, error) {
	t.Helper()
	dir := t.TempDir()
	testsupport.WriteFiles(t, dir, files)
	t.Chdir(dir)
	l := &interp.Loader{Stdlib: fstest.MapFS{
		"greet.star": {Data: []byte(`plug(name = "blaise/greet", inputs = schema.object(who = schema.string(default = "world")))
def on_session(ctx, next):
    next()
`)},
	}}
	return l.LoadConfig("blaise.star")
}

// wantError loads files and checks that the error holds every want.
func wantError(t *testing.T, files map[string]string, want ...string) {
	t.Helper()
	_, err := load(t, files)
	checkError(t, err, want...)
}

// checkError checks that err holds every want and no Go internals.
func checkError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error:\n%v\nlacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "*interp.") || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("error shows Go internals: %v", err)
	}
}

const agentLine = `agent(command = "demo")
`

func TestConfig_LoadsChain(t *testing.T) {
	cfg, err := load(t, map[string]string{
		"blaise.star": agentLine + `load("./lib/ids.star", "ID")
setup(
    use("blaise:greet", id = ID, inputs = {"who": "you"}),
    use("./plugs/p.star"),
)`,
		"lib/ids.star": `ID = "g"`,
		"plugs/p.star": `load("../lib/ids.star", "ID")
plug(name = "acme/p", resumable = False, description = "a plug " + ID)
def on_session(ctx, next):
    next()
def on_message(ctx, message, next):
    return next(message)
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Uses) != 2 || cfg.Uses[0].Plug.Name != "blaise/greet" || cfg.Uses[0].ID != "g" || cfg.Uses[1].Plug.Description != "a plug g" {
		t.Fatalf("uses %+v", cfg.Uses)
	}
	if cfg.Resumable() {
		t.Fatal("resumable with a resumable = False plug (C12)")
	}
	if got := strings.Join(cfg.Uses[1].Plug.Handlers(), ","); got != "on_session,on_message" {
		t.Fatalf("handlers %s", got)
	}
	if cfg.Uses[0].Plug.APIVersion != interp.APIVersion {
		t.Fatal("plug not stamped with the API version")
	}
}

func TestConfig_SyntaxError(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"p\")\ndef on_session(ctx, next)\n    next()\n",
	}, "blaise.star:2:10", `use "./p.star"`, "p.star:3:1: got newline, want ':'")
}

func TestC14_WrongInputTypeNamesPlugAndField(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("blaise:greet", inputs = {"who": 3}))`,
	}, "blaise.star:2:10", "plug blaise/greet: inputs.who: want string, got int")
}

func TestC14_MissingRequiredInput(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star", inputs = {"other": 1}))`,
		"p.star":      `plug(name = "p", inputs = schema.object(repo = schema.string(), other = schema.int()))`,
	}, "blaise.star:2:10", "plug p: inputs.repo: required field missing (want string)")
}

func TestC14_UnknownInputSuggests(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("blaise:greet", inputs = {"woh": "x"}))`,
	}, `inputs.woh: unknown field (did you mean "who"?)`)
}

func TestConfig_UnknownPlugReference(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./nope.star"))`,
	}, "blaise.star:2:10", `use "./nope.star": cannot read nope.star: no such file or directory`)
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("blaise:nope"))`,
	}, "blaise.star:2:10", "no plug or module blaise:nope in the standard library")
}

func TestConfig_LoadCycle(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      `load("./a.star", "A")` + "\nplug(name = \"p\")",
		"a.star":      `load("./b.star", "B")` + "\nA = 1",
		"b.star":      `load("./a.star", "A")` + "\nB = 1",
	}, "load cycle: a.star → b.star → a.star")
}

func TestConfig_DuplicateIDs(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(
    use("blaise:greet", id = "g"),
    use("blaise:greet", id = "g"),
)`,
	}, `blaise.star:4:8: duplicate id "g": also used at blaise.star:3:8`)
}

func TestC11_PersistedNeedsID(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      `plug(name = "keeper", persisted = schema.object(n = schema.int()))`,
	}, "blaise.star:2:10", "plug keeper declares persisted state, so it needs an id")
}

func TestConfig_HandlerArity(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"p\")\n\ndef on_session(ctx):\n    pass\n",
	}, "p.star:3:1: plug p: on_session must take 2 parameters (ctx, next), takes 1")
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"p\")\ndef on_message(ctx, message):\n    pass\n",
	}, "p.star:2:1: plug p: on_message must take 3 parameters (ctx, message, next), takes 2")
}

func TestConfig_MisspelledHandler(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"p\")\ndef on_sesion(ctx, next):\n    next()\n",
	}, "p.star:2:1: plug p: on_sesion is not a handler name (did you mean on_session?)")
}

func TestConfig_PlugMustCallPlug(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "def on_session(ctx, next):\n    next()\n",
	}, "p.star:1:1: not a plug: the file never calls plug(name = ...)")
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"a\")\nplug(name = \"b\")\n",
	}, "p.star:2:5", "plug() called twice: first at p.star:1:5")
	wantError(t, map[string]string{
		"blaise.star": agentLine + `plug(name = "x")`,
	}, "blaise.star:2:5: plug() may only be called in a plug file")
}

func TestConfig_AgentMissingOrTwice(t *testing.T) {
	wantError(t, map[string]string{"blaise.star": `setup()`}, "blaise.star:1:1: no agent: call agent(command = ...)")
	wantError(t, map[string]string{"blaise.star": agentLine + agentLine}, "blaise.star:2:6", "agent() called twice: first at blaise.star:1:6")
	wantError(t, map[string]string{"blaise.star": `agent(command = "a", args = ["x", 1])`}, "agent: args[1]: want string, got int")
}

func TestConfig_LoadInfiniteLoopIsStopped(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + "while True:\n    pass\n",
	}, "blaise.star:", "too many steps")
}

func TestConfig_RuntimeErrorHasBacktrace(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `load("./lib.star", "f")
setup(use("blaise:greet", inputs = {"who": f()}))`,
		"lib.star": "def f():\n    return g()\ndef g():\n    return 1 // 0\n",
	}, "lib.star:4:14: floored division by zero", "Traceback (most recent call last)", "blaise.star:3:45: in <toplevel>", "lib.star:2:13: in f")
}

func TestConfig_PlugFileIsNotAModule(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `load("./p.star", "x")`,
		"p.star":      "plug(name = \"p\")\nx = 1\n",
	}, "p.star:1:5: plug() may only be called in a plug file, not in a configuration or a module for load()")
}

// TestModuleTriedAsAPlugStillLoads: a module that one Loader was asked
// to load as a plug (and refused, saying it is not one, each time) is
// still a module for the plugs that load() it afterwards.
func TestModuleTriedAsAPlugStillLoads(t *testing.T) {
	l := &interp.Loader{Stdlib: fstest.MapFS{
		"lib.star":  {Data: []byte("X = 1\n")},
		"user.star": {Data: []byte("load(\"blaise:lib\", \"X\")\nplug(name = \"user\", description = \"x is %d\" % X)\n")},
	}}
	for range 2 {
		_, err := l.LoadPlug("blaise:lib")
		if !errors.Is(err, interp.ErrNotAPlug) {
			t.Fatalf("blaise:lib as a plug: %v, want ErrNotAPlug", err)
		}
	}
	p, err := l.LoadPlug("blaise:user")
	if err != nil {
		t.Fatalf("a plug that loads the module afterwards: %v", err)
	}
	if p.Description != "x is 1" {
		t.Fatalf("the plug saw the module's X as %q", p.Description)
	}
}

func TestM2_ExtensionsNeedOnMessage(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      "plug(name = \"p\", extensions = True)\ndef on_session(ctx, next):\n    next()\n",
	}, "p.star:1:5: plug p: extensions = True needs an on_message handler to see them")
}
