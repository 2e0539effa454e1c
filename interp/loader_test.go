package interp_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
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
	}, "blaise.star:2:44: plug blaise/greet: inputs.who: want string, got int")
}

func TestC14_MissingRequiredInput(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star", inputs = {"other": 1}))`,
		"p.star":      `plug(name = "p", inputs = schema.object(repo = schema.string(), other = schema.int()))`,
	}, "blaise.star:2:32: plug p: inputs.repo: required field missing (want string)")
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

func TestConfig_SetupTwiceSaysWhereTheFirstIs(t *testing.T) {
	wantError(t, map[string]string{"blaise.star": agentLine + "setup()\nsetup()\n"}, "setup() called twice: first at blaise.star:2:6")
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

// TestCheckReportsEveryIndependentMistakeInOnePass: a handler name typo in
// one plug does not hide an input of the wrong type, a second plug's
// mistakes, a duplicate id or a bad session setting; each comes once, with
// its place, sorted by file and position.
func TestCheckReportsEveryIndependentMistakeInOnePass(t *testing.T) {
	_, err := load(t, map[string]string{
		"blaise.star": agentLine + `session(idle_policy = "sleep")
setup(
    use("./p.star", inputs = {"repo": 1}),
    use("./p.star", id = "x", inputs = {"repo": "r", "tags": ["a", 2]}),
    use("./q.star", id = "x"),
)
`,
		"p.star": `plug(name = "p", inputs = schema.object(repo = schema.string(), tags = schema.list(schema.string(), default = [])))
def on_sesion(ctx, next):
    next()
def on_teardown(ctx):
    pass
`,
		"q.star": `plug(name = "q")
def on_mesage(ctx, message, next):
    return next(message)
`,
	})
	var list interp.Errors
	if !errors.As(err, &list) {
		t.Fatalf("error %v (%T), want interp.Errors", err, err)
	}
	want := []string{
		`blaise.star:2:8: session: idle_policy: want "pause" or "end", got "sleep"`,
		`blaise.star:4:8: use "./p.star": p.star:2:1: plug p: on_sesion is not a handler name (did you mean on_session?)`,
		`blaise.star:4:8: use "./p.star": p.star:4:1: plug p: on_teardown must take 2 parameters (ctx, next), takes 1`,
		`blaise.star:4:39: plug p: inputs.repo: want string, got int`,
		`blaise.star:5:68: plug p: inputs.tags[1]: want string, got int`,
		`blaise.star:6:8: use "./q.star": q.star:2:1: plug q: on_mesage is not a handler name (did you mean on_message?)`,
		`blaise.star:6:8: duplicate id "x": also used at blaise.star:5:8`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// TestC14_InputMistakePointsAtTheValue: a problem of inputs is placed at
// the value it is about, through nested objects, lists and dict(...), at
// the key of an unknown field, and at the dict that lacks a required field.
func TestC14_InputMistakePointsAtTheValue(t *testing.T) {
	plug := `plug(name = "p", inputs = schema.object(repo = schema.string(), git = schema.object(branch = schema.string(), depth = schema.int(default = 1)), tags = schema.list(schema.string(), default = []), labels = schema.dict(schema.string(), default = {})))`
	for _, tc := range []struct{ use, want string }{
		{`use("./p.star", inputs = {"repo": "r", "git": {"branch": 7}})`, `blaise.star:3:64: plug p: inputs.git.branch: want string, got int`},
		{`use("./p.star", inputs = dict(repo = "r", git = dict(branch = "b", depth = "deep")))`, `blaise.star:3:82: plug p: inputs.git.depth: want int, got string`},
		{`use("./p.star", inputs = {"repo": "r", "git": {"branch": "b", "dpth": 2}})`, `blaise.star:3:69: plug p: inputs.git.dpth: unknown field (did you mean "depth"?)`},
		{`use("./p.star", inputs = {"git": {"branch": "b"}})`, `blaise.star:3:32: plug p: inputs.repo: required field missing (want string)`},
		{`use("./p.star", inputs = INPUTS)`, `blaise.star:3:32: plug p: inputs.repo: want string, got int`},
		{`use("./p.star", inputs = {"repo": "r", "git": {"branch": "b"}, "tags": ("a", 1)})`, `blaise.star:3:84: plug p: inputs.tags[1]: want string, got int`},
		{`use("./p.star", inputs = {"repo": "r", "git": {"branch": "b"}, "labels": {"team name": 1}})`, `blaise.star:3:94: plug p: inputs.labels["team name"]: want string, got int`},
	} {
		_, err := load(t, map[string]string{
			"blaise.star": agentLine + "INPUTS = {\"repo\": 1, \"git\": {\"branch\": \"b\"}}\nsetup(" + tc.use + ")\n",
			"p.star":      plug,
		})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %s", tc.use, err, tc.want)
		}
	}
}

// TestDanglingDotSaysAFieldNameIsMissing: `ctx.` with nothing after it, at
// a line's end or before a bracket, is reported at the dot as a missing
// field name, not as the parser's "not an identifier".
func TestDanglingDotSaysAFieldNameIsMissing(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"    x = ctx.\n    next()\n", "p.star:3:12: expected a field name after '.'"},
		{"    ctx.log.info(ctx.)\n    next()\n", "p.star:3:21: expected a field name after '.'"},
		{"    ctx.log.info(ctx.\n", "p.star:3:21: expected a field name after '.'"},
	} {
		wantError(t, map[string]string{
			"blaise.star": agentLine + `setup(use("./p.star"))`,
			"p.star":      "plug(name = \"p\")\ndef on_session(ctx, next):\n" + tc.line,
		}, tc.want)
	}
}

// TestFallback_FilesBelowFromFindWhatIsMissingRelativeToTo: a file below
// Fallback.From reaches a file that is missing there at the same place
// relative to Fallback.To, ".." included, and what is there wins; files
// elsewhere do not fall back.
func TestFallback_FilesBelowFromFindWhatIsMissingRelativeToTo(t *testing.T) {
	dir := t.TempDir()
	plug := func(name string) string { return "plug(name = \"" + name + "\")\n" }
	testsupport.WriteFiles(t, dir, map[string]string{
		"work/config/blaise.star":     "agent(command = \"a\")\nsetup(use(\"./own.star\"), use(\"./plugs/beside.star\"), use(\"../shared/up.star\"), use(\"./plugs/both.star\"))\n",
		"work/config/own.star":        plug("own"),
		"work/config/plugs/both.star": plug("both-own"),
		"repo/t/plugs/beside.star":    plug("beside"),
		"repo/t/plugs/both.star":      plug("both-beside"),
		"repo/shared/up.star":         plug("up"),
		"other/blaise.star":           "agent(command = \"a\")\nsetup(use(\"./plugs/beside.star\"))\n",
	})
	l := &interp.Loader{Fallback: &interp.Fallback{From: dir + "/work/config", To: dir + "/repo/t"}}
	cfg, err := l.LoadConfig(dir + "/work/config/blaise.star")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"own":    dir + "/work/config/own.star",
		"beside": dir + "/repo/t/plugs/beside.star",
		"up":     dir + "/repo/shared/up.star",
		// A file of the test's own wins over the one beside the test.
		"both-own": dir + "/work/config/plugs/both.star",
	}
	if len(cfg.Uses) != len(want) {
		t.Fatalf("%d plugs, want %d", len(cfg.Uses), len(want))
	}
	for _, u := range cfg.Uses {
		if u.Key != want[u.Plug.Name] {
			t.Errorf("plug %s from %s, want %s", u.Plug.Name, u.Key, want[u.Plug.Name])
		}
	}
	l = &interp.Loader{Fallback: &interp.Fallback{From: dir + "/work/config", To: dir + "/repo/t"}}
	_, err = l.LoadConfig(dir + "/other/blaise.star")
	checkError(t, err, "cannot read", "other/plugs/beside.star")
}
