package builtins

import (
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// evalRe evaluates a Starlark expression with the predeclared names of plugs.
func evalRe(t *testing.T, expr string) (starlark.Value, error) {
	t.Helper()
	thread := &starlark.Thread{Name: "test"}
	return starlark.EvalOptions(interp.FileOptions, thread, "test.star", expr, Predeclared)
}

// exprCase is an expression and what it evaluates to, or its error holds.
type exprCase struct{ expr, want string }

// wantValues checks that each expression evaluates to its want, as
// Starlark writes values.
func wantValues(t *testing.T, cases []exprCase) {
	t.Helper()
	for _, tc := range cases {
		v, err := evalRe(t, tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got := v.String(); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
		}
	}
}

// wantErrors checks that each expression fails with an error holding want.
func wantErrors(t *testing.T, cases []exprCase) {
	t.Helper()
	for _, tc := range cases {
		if _, err := evalRe(t, tc.expr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.expr, err, tc.want)
		}
	}
}

func TestRe(t *testing.T) {
	wantValues(t, []exprCase{
		{`re.search(r"ghp_[A-Za-z0-9]+", "token ghp_abc123 here").group()`, `"ghp_abc123"`},
		{`re.match(r"ghp_", "token ghp_abc")`, `None`},
		{`re.match(r"tok", "token").span()`, `(0, 3)`},
		{`re.match(r"(?m)^b", "a\nb")`, `None`}, // match anchors at the start of the text, not of a line
		{`re.fullmatch(r"a+", "aaa") != None`, `True`},
		{`re.fullmatch(r"a+", "aab")`, `None`},
		{`re.findall(r"\d+", "a1 b22 c333")`, `["1", "22", "333"]`},
		{`re.findall(r"(\w)=(\d)", "a=1 b=2")`, `[("a", "1"), ("b", "2")]`},
		{`re.findall(r"(\w)=\d", "a=1 b=2")`, `["a", "b"]`},
		{`re.sub(r"ghp_\w+", "[REDACTED]", "x ghp_a y ghp_b")`, `"x [REDACTED] y [REDACTED]"`},
		{`re.sub(r"(\w+)@(\w+)", "$2 at ${1}", "me@host")`, `"host at me"`},
		{`re.sub(r"\d", "#", "a1b2c3", count = 2)`, `"a#b#c3"`},
		{`re.sub(r"\d+", lambda m: str(int(m.group()) * 2), "3 and 21")`, `"6 and 42"`},
		{`re.split(r",\s*", "a, b,c")`, `["a", "b", "c"]`},
		{`re.split(r"(,)", "a,b")`, `["a", ",", "b"]`},
		{`re.split(r",", "a,b,c", maxsplit = 1)`, `["a", "b,c"]`},
		{`re.escape("a.b*c")`, `"a\\.b\\*c"`},
		{`re.compile(r"(?P<user>\w+)@(?P<host>\w+)").search("x me@host").group("host", 1)`, `("host", "me")`},
		{`re.compile(r"(?P<user>\w+)@(?P<host>\w+)").search("me@host").groupdict()`, `{"user": "me", "host": "host"}`},
		{`re.compile(r"(a)|(b)").search("b").groups()`, `(None, "b")`},
		{`re.compile(r"(a)|(b)").search("b").groups(default = "")`, `("", "b")`},
		{`re.compile(r"x(y)").search("axy").start(1)`, `2`},
		{`re.compile(r"x(y)").search("axy").end()`, `3`},
		{`re.compile(r"a(b)").pattern`, `"a(b)"`},
		{`re.compile(r"a(b)").groups`, `1`},
		{`re.compile(r"a").match("ab").string`, `"ab"`},
		{`re.search(re.compile("b"), "abc").group()`, `"b"`},
	})
}

func TestReErrors(t *testing.T) {
	wantErrors(t, []exprCase{
		{`re.compile("ghp_[")`, `re.compile: bad pattern "ghp_[": missing closing ]: ` + "`[`"},
		{`re.search("a(", "x")`, `re.search: for parameter pattern: bad pattern "a(": missing closing )`},
		{`re.search(1, "x")`, `re.search: for parameter pattern: want a string or re.pattern, got int`},
		{`re.search()`, `re.search: missing argument for pattern`},
		{`re.match("a", 1)`, `match: for parameter string: got int, want string`},
		{`re.sub(r"(\w+)", r"<\1>", "x")`, `refers to a group Python's way; Go's templates write $1`},
		{`re.sub("a", 1, "a")`, `want a string or a function, got int`},
		{`re.sub("a", lambda m: 1, "a")`, `the replacement function returned int, want a string`},
		{`re.search("(a)", "a").group(2)`, `no group 2: the pattern "(a)" has 1`},
		{`re.search("(a)", "a").group("x")`, `no group named "x" in the pattern "(a)"`},
		{`re.search("a", "a").nosuch`, `has no .nosuch field or method`},
	})
}

func TestTimeModule(t *testing.T) {
	v, err := evalRe(t, `(time.parse_duration("90s") + time.minute) // time.second`)
	if err != nil {
		t.Fatal(err)
	}
	if v.String() != "150" {
		t.Errorf("got %s, want 150", v)
	}
}

func BenchmarkReSubCached(b *testing.B) {
	thread := &starlark.Thread{Name: "bench"}
	sub := reModule.Members["sub"].(*starlark.Builtin)
	args := starlark.Tuple{starlark.String(`ghp_[A-Za-z0-9]+`), starlark.String("[REDACTED]"), starlark.String(strings.Repeat("some text ghp_abc123 ", 50))}
	for b.Loop() {
		if _, err := starlark.Call(thread, sub, args, nil); err != nil {
			b.Fatal(err)
		}
	}
}
