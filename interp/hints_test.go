package interp_test

import (
	"strings"
	"testing"
)

// TestPythonHabitsGetHints: Python-only syntax in a plug is reported at
// its place with what Starlark has instead, once, in the file that has it.
func TestPythonHabitsGetHints(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"x = 1\nif x is None:\n    pass\n", "p.star:2:8: got is, want ':' (Starlark has no `is`; use `==`"},
		{"x = f\"a{1}\"\n", "p.star:1:12: got string literal, want newline (Starlark has no f-strings"},
		{"x = 2\ny = Rf'{x}'\n", "(Starlark has no f-strings"},
		{"try:\n    x = 1\nexcept:\n    pass\n", "p.star:1:1: got try, want primary expression (Starlark has no exceptions"},
		{"def f():\n    raise ValueError(1)\n", "(Starlark has no `raise`; use `fail(msg)`"},
		{"class A:\n    pass\n", "(Starlark has no classes"},
		{"import os\n", "(Starlark has no `import`; use `load(\"./lib.star\", \"name\")`)"},
		{"from os import path\n", "(Starlark has no `import`"},
		{"with x as y:\n    pass\n", "(Starlark has no `with`"},
		{"def f():\n    global x\n", "(Starlark has no `global`"},
		{"def f():\n    nonlocal x\n", "(Starlark has no `nonlocal`"},
		{"x = [1]\ndel x\n", "(Starlark has no `del`"},
		{"assert 1 == 1\n", "p.star:1:9: got int literal, want newline (Starlark has no `assert`; write `if not cond: fail(msg)`)"},
		{"x = {1, 2}\n", "(Starlark has no set literals; use `set([a, b])`)"},
	} {
		_, err := load(t, map[string]string{
			"blaise.star": agentLine + `setup(use("./p.star"))`,
			"p.star":      tc.src + "plug(name = \"p\")\n",
		})
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.src, tc.want)
			continue
		}
		got, want := err.Error(), tc.want
		if !strings.Contains(got, want) {
			t.Errorf("%q: error\n%s\nlacks %q", tc.src, got, want)
		}
		if strings.Count(got, "(Starlark has no") != 1 {
			t.Errorf("%q: want one hint, got\n%s", tc.src, got)
		}
	}
}

// TestNoHintForStarlarkMistakes: an ordinary syntax error gets no hint.
func TestNoHintForStarlarkMistakes(t *testing.T) {
	_, err := load(t, map[string]string{"blaise.star": agentLine + "x = (1\n"})
	if err == nil || strings.Contains(err.Error(), "Starlark has no") {
		t.Errorf("error %v, want one without a hint", err)
	}
}
