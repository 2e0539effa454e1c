package builtins

import (
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

func TestRedactModule(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`redact.secrets({"t": "ghp_abcdef"}).text("a ghp_abcdef b")`, `"a [REDACTED:t] b"`},
		{`redact.secrets({}).text("nothing")`, `"nothing"`},
		{`[s.next("x ghp_ab"), s.held, s.next("cdef y"), s.flush()] if True else None`, `["x ", True, "[REDACTED:t] y", ""]`},
	} {
		thread := &starlark.Thread{Name: "test"}
		env := starlark.StringDict{}
		for k, v := range Predeclared {
			env[k] = v
		}
		env["s"] = mustEval(t, `redact.secrets({"t": "ghp_abcdef"}).stream()`)
		v, err := starlark.EvalOptions(interp.FileOptions, thread, "test.star", tc.expr, env)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if v.String() != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, v, tc.want)
		}
	}
}

func mustEval(t *testing.T, expr string) starlark.Value {
	t.Helper()
	v, err := evalRe(t, expr)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRedactMessage: a message with a secret comes back with the secret
// replaced in its JSON; one without is the same message, byte for byte.
func TestRedactMessage(t *testing.T) {
	r := mustEval(t, `redact.secrets({"t": "ghp_abcdef"})`)
	method, _ := r.(*Redactor).Attr("message")
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","method":"_x","params":{"text":"a ghp_abcdef","n":1.50}}`, `{"jsonrpc":"2.0","method":"_x","params":{"text":"a [REDACTED:t]","n":1.50}}`},
		{`{"jsonrpc":"2.0","id":3,"result":{"out":"Z2hwX2FiY2RlZg=="}}`, `{"jsonrpc":"2.0","id":3,"result":{"out":"[REDACTED:t]"}}`},
		{`{"jsonrpc":"2.0","method":"_x","params":{"text":"clean","n":1.50}}`, `{"jsonrpc":"2.0","method":"_x","params":{"text":"clean","n":1.50}}`},
	} {
		m, err := acp.Parse([]byte(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		in := NewMessage(FromAgent, m)
		out, err := starlark.Call(&starlark.Thread{}, method, starlark.Tuple{in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*Message)
		enc, err := got.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if string(enc.Raw) != tc.want {
			t.Errorf("%s → %s, want %s", tc.line, enc.Raw, tc.want)
		}
		if strings.Contains(tc.line, "clean") && got != in {
			t.Errorf("a clean message was replaced by a copy")
		}
	}
}

func TestRedactErrors(t *testing.T) {
	wantErrors(t, []exprCase{
		{`redact.secrets({"pin": "123"})`, "redact.secrets: secret pin: its value is 3 bytes long; one shorter than 4 would redact ordinary words"},
		{`redact.secrets(["a"])`, "redact.secrets: for parameter secrets: want a dict of secret values by name, got list"},
		{`redact.secrets({"a": 1})`, "want string names and values, got string: int"},
	})
}

// TestRedactSecretsRegistersWithTheRun: the values a plug gives
// redact.secrets reach the run's registry, which redacts what no plug's
// redactor sees (logs, errors).
func TestRedactSecretsRegistersWithTheRun(t *testing.T) {
	thread := &starlark.Thread{Name: "test"}
	var run redact.Registry
	SetRedactions(thread, &run)
	if _, err := starlark.EvalOptions(interp.FileOptions, thread, "test.star", `redact.secrets({"t": "ghp_abcdef"})`, Predeclared); err != nil {
		t.Fatal(err)
	}
	if got, want := run.String("log: ghp_abcdef"), "log: [REDACTED:t]"; got != want {
		t.Errorf("the run redacts %q, want %q", got, want)
	}
}
