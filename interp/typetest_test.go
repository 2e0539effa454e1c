package interp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// TestMessageObjectsAnswerDictToTypeAndObjectStillMatches: type() of a
// message's JSON object is "dict", as before objects read with dots, in
// every form of test (a comprehension too); a test written against
// "object" in between still matches, in the plug and in a module it
// loads, and check warns of each.
func TestMessageObjectsAnswerDictToTypeAndObjectStillMatches(t *testing.T) {
	cfg, err := load(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"lib.star": `def is_object(x):
    return type(x) == "object"
`,
		"p.star": `load("./lib.star", "is_object")

plug(name = "acme/types")

def old(x):
    return type(x) == "dict", "dict" == type(x), [k for k in x if type(x[k]) == "dict"], type(x["c"])

def new(x):
    t = type(x)
    return t == "object", type(x) != "object", type(x) in ("object", "list"), [k for k in x if type(x[k]) == "object"], is_object(x)

def plain(type):
    return type == "object"

def on_message(ctx, message, next):
    return next(message)
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Uses[0].Plug
	globals := p.OnMessage.Globals()
	obj, err := interp.DecodeObjects([]byte(`{"a":{"b":1},"c":2}`), "message.params")
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, arg starlark.Value) string {
		v, err := starlark.Call(&starlark.Thread{}, globals[name], starlark.Tuple{arg}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v.String()
	}
	if got, want := call("old", obj), `(True, True, ["a"], "int")`; got != want {
		t.Errorf("old idiom: got %s, want %s", got, want)
	}
	if got, want := call("new", obj), `(True, False, True, ["a"], True)`; got != want {
		t.Errorf("object idiom: got %s, want %s", got, want)
	}
	if got := call("plain", starlark.String("object")); got != "True" {
		t.Errorf("a parameter named type is not what type() gave: got %s", got)
	}
	var warned []string
	for _, w := range p.Warnings {
		warned = append(warned, fmt.Sprintf("%s:%d:%d", w.Pos.Filename(), w.Pos.Line, w.Pos.Col))
		if !strings.Contains(w.Error(), `"object" is read as "dict" here; write "dict"`) {
			t.Errorf("warning: %v", w)
		}
	}
	if got, want := strings.Join(warned, " "), "p.star:10:17 p.star:10:38 p.star:10:60 p.star:10:110 lib.star:2:23"; got != want {
		t.Errorf("warnings at %s, want %s", got, want)
	}
}
