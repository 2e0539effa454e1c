package builtins

import (
	"testing"
)

func TestPath(t *testing.T) {
	wantValues(t, []exprCase{
		{`path.clean("/w/src/../../etc//x/.")`, `"/etc/x"`},
		{`path.join("/w", "src", "../lib", "a.go")`, `"/w/lib/a.go"`},
		{`path.join("/w", "/etc/passwd")`, `"/etc/passwd"`},
		{`path.join("a", "b")`, `"a/b"`},
		{`path.join()`, `""`},
		{`path.base("/w/a.go")`, `"a.go"`},
		{`path.dir("/w/a.go")`, `"/w"`},
		{`path.ext("/w/a.tar.gz")`, `".gz"`},
		{`path.is_abs("/w"), path.is_abs("w")`, `(True, False)`},
		{`path.within("/w/src/a.go", "/w")`, `True`},
		{`path.within("/w", "/w/")`, `True`},
		{`path.within("/w/src/../../etc", "/w")`, `False`},
		{`path.within("/wx/a", "/w")`, `False`},
		{`path.within("/anything", "/")`, `True`},
		{`path.match("src/**", "src/a/b.go")`, `True`},
		{`path.match("**/*.go", "a/b/c.go")`, `True`},
		{`path.match("**/*.go", "c.go")`, `True`},
		{`path.match("*.go", "a/c.go")`, `False`},
		{`path.match("a?c.[ch]", "abc.[ch]")`, `True`},
		{`path.match("a?c", "a/c")`, `False`},
	})
}

func TestPathErrors(t *testing.T) {
	wantErrors(t, []exprCase{
		{`path.join("a", 1)`, "path.join: argument 2: got int, want string"},
		{`path.within("/a")`, "path.within: missing argument for root"},
		{`path.clean(None)`, "path.clean: for parameter path: got NoneType, want string"},
	})
}
