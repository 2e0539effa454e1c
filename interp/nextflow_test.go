package interp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestC2_NextCalledTwiceOrNotAtAllFoundBeforeARun: what is certain on every
// path that gets there is reported, with its line and column; what depends
// on conditions that may be related (two ifs on the same test), on loops,
// or on a helper that gets next, is not. on_message may answer without
// next(), and any handler may fail() instead of calling it.
func TestC2_NextCalledTwiceOrNotAtAllFoundBeforeARun(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string // line:col: message start, " | " between
	}{
		{"def on_session(ctx, next):\n    next()\n", ""},
		{"def on_session(ctx, next):\n    info = next()\n    next()\n", "3:9: on_session: next() called again here"},
		{"def on_session(ctx, next):\n    ctx.log.info(\"x\")\n", "1:1: on_session: reaches its end without calling next()"},
		{"def on_session(ctx, next):\n    if ctx.inputs.skip:\n        return\n    next()\n", "3:9: on_session: returns here without calling next()"},
		{"def on_session(ctx, next):\n    if ctx.inputs.bad:\n        fail(\"bad\")\n    next()\n", ""},
		{"def on_session(ctx, next):\n    fail(\"never\")\n", ""},
		{"def on_session(ctx, next):\n    if ctx.inputs.a:\n        next()\n    if not ctx.inputs.a:\n        next()\n", ""},
		{"def on_session(ctx, next):\n    if ctx.inputs.a:\n        next()\n    else:\n        next()\n    next()\n", "6:9: on_session: next() called again here"},
		{"def on_session(ctx, next):\n    x = next() if ctx.inputs.a else None\n", ""},
		{"def on_session(ctx, next):\n    x = ctx.inputs.a and next()\n    return x\n", ""},
		{"def on_session(ctx, next):\n    for x in ctx.inputs.l:\n        next()\n", ""},
		{"def on_session(ctx, next):\n    next()\n    for x in ctx.inputs.l:\n        next()\n", "4:13: on_session: next() called again here"},
		{"def on_session(ctx, next):\n    for x in ctx.inputs.l:\n        if x:\n            return\n    next()\n", "4:13: on_session: returns here without calling next()"},
		{"def on_session(ctx, next):\n    while True:\n        if ctx.inputs.a:\n            break\n    return\n", "5:5: on_session: returns here without calling next()"},
		{"def on_session(ctx, next):\n    while True:\n        next()\n        break\n    next()\n", "5:9: on_session: next() called again here"},
		{"def on_session(ctx, next):\n    helper(ctx, next)\n", ""},
		{"def on_session(ctx, next):\n    f = lambda: next()\n    f()\n", ""},
		{"def on_session(ctx, nxt):\n    nxt()\n    nxt()\n", "3:8: on_session: next() called again here"},
		{"def on_session(ctx, next):\n    return [next(), next()]\n", "2:25: on_session: next() called again here"},
		{"def on_teardown(ctx, next):\n    if ctx.inputs.keep:\n        return\n    next()\n", "3:9: on_teardown: returns here without calling next()"},
		{"def on_message(ctx, message, next):\n    if message.method == \"x\":\n        return {}\n    return next(message)\n", ""},
		{"def on_message(ctx, message, next):\n    ctx.log.info(\"x\")\n", ""},
		{"def on_message(ctx, message, next):\n    r = next(message)\n    return next(message)\n", "3:16: on_message: next() called again here: every path to this call has called it already; call it at most once"},
		{"def helper(ctx, next):\n    next()\n    next()\n", ""},
		{"def on_session(ctx, next):\n    if ctx.inputs.a:\n        return\n    next()\n    next()\n", "3:9: on_session: returns here | 5:9: on_session: next() called again"},
	} {
		f, err := FileOptions.Parse("p.star", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range nextMistakes(f, "p") {
			got = append(got, fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg))
		}
		want := strings.Split(tc.want, " | ")
		if tc.want == "" {
			want = nil
		}
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], want[i])
		}
		if !ok {
			t.Errorf("%s: found %q, want %q", tc.src, got, want)
		}
	}
}

// TestNextMistakesNoneInTheShippedPlugs: the standard library's plugs and
// the examples' call next() rightly, and nothing is reported of them.
func TestNextMistakesNoneInTheShippedPlugs(t *testing.T) {
	files, _ := filepath.Glob("../stdlib/*.star")
	examples, _ := filepath.Glob("../examples/*/*/*.star")
	files = append(files, examples...)
	if len(files) < 5 {
		t.Fatalf("only %d plugs found: %v", len(files), files)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := FileOptions.Parse(name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range nextMistakes(f, "p") {
			t.Errorf("%s: %v", name, e)
		}
	}
}
