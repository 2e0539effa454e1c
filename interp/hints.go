package interp

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// pythonKeywords are the words of Python that Starlark lacks, with what to
// write instead. The parser meets them as unexpected tokens.
var pythonKeywords = map[string]string{
	"is":       "Starlark has no `is`; use `==` (or `!=`), as in `x == None`",
	"try":      "Starlark has no exceptions: a failure ends the handler (call `fail(msg)` to fail on purpose); `next()` never fails, so pause code needs no `try`",
	"except":   "Starlark has no exceptions: a failure ends the handler (call `fail(msg)` to fail on purpose); `next()` never fails, so pause code needs no `try`",
	"finally":  "Starlark has no exceptions: a failure ends the handler (call `fail(msg)` to fail on purpose); `next()` never fails, so pause code needs no `try`",
	"raise":    "Starlark has no `raise`; use `fail(msg)`, or `return request_error(code, msg)` to answer a request with an error",
	"class":    "Starlark has no classes; use `struct(name = value, …)` or a dict",
	"import":   "Starlark has no `import`; use `load(\"./lib.star\", \"name\")`",
	"from":     "Starlark has no `import`; use `load(\"./lib.star\", \"name\")`",
	"with":     "Starlark has no `with`; call the function and use its result",
	"yield":    "Starlark has no generators; build and return a list",
	"global":   "Starlark has no `global`: globals are frozen once the file is loaded; keep what a run changes in `ctx.state`",
	"nonlocal": "Starlark has no `nonlocal`: keep what changes in a dict or list and change its contents",
	"del":      "Starlark has no `del`; remove a key with `d.pop(key)`, an item with `l.remove(x)` or `l.pop(i)`",
	"assert":   "Starlark has no `assert`; write `if not cond: fail(msg)`",
}

// gotToken finds the unexpected token of a parser error: "got is, want ':'".
var gotToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^got ([a-z]+)(?: literal)?, want`) })

// fString finds an f-string prefix: f"…", rf'…' …
var fString = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(?i:f|rf|fr)["']`) })

// pythonHint returns a hint for a syntax error of file that Python habits
// cause, or "": a Python keyword Starlark lacks, an f-string, assert, a set
// literal. The parser places an error at the end of the unexpected token.
func pythonHint(err error, file string, src []byte) string {
	var se syntax.Error
	if !errors.As(err, &se) || se.Pos.Filename() != file {
		return "" // another file's, hinted where that file was loaded
	}
	if m := gotToken().FindStringSubmatch(se.Msg); m != nil {
		if hint, ok := pythonKeywords[m[1]]; ok {
			return hint
		}
	}
	line := sourceLine(src, int(se.Pos.Line))
	switch {
	case strings.HasPrefix(se.Msg, "got string literal") && fString().MatchString(line):
		return "Starlark has no f-strings; use `\"%s\" % x` or `\"{}\".format(x)`"
	case strings.HasPrefix(strings.TrimSpace(line), "assert "):
		return pythonKeywords["assert"]
	case strings.HasPrefix(se.Msg, "got ',', want ':'") && strings.Contains(line, "{"):
		return "Starlark has no set literals; use `set([a, b])`"
	}
	return ""
}

// sourceLine returns line n (from 1) of src, without its line end.
func sourceLine(src []byte, n int) string {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return ""
		}
		src = src[j+1:]
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return string(src)
}

// WithHint returns err, from loading src of file, as a run or check
// reports it: a dangling dot said as such, and the hint of pythonHint
// added. `blaise-agent fmt`, which parses files on its own, says the same.
func WithHint(err error, file string, src []byte) *Error {
	e := WrapError(err, "", "")
	danglingDot(e, file, src)
	if hint := pythonHint(err, file, src); hint != "" {
		e.Msg += " (" + hint + ")"
	}
	return e
}

// danglingDot rewrites the parser's "not an identifier" after a dot with
// nothing but space after it (`ctx.` while typing) to say what is missing,
// at the dot.
func danglingDot(e *Error, file string, src []byte) {
	if e.Msg != "not an identifier" || e.Pos.Filename() != file {
		return
	}
	// The parser places the error after the token that is not a name: a
	// line end, or a closing bracket as in `f(ctx.)`.
	i := offsetOf(src, e.Pos)
	space := func() {
		for i > 0 && strings.ContainsRune(" \t\r\n", rune(src[i-1])) {
			i--
		}
	}
	space()
	if i > 0 && strings.ContainsRune(")]},:", rune(src[i-1])) {
		i--
		space()
	}
	if i == 0 || src[i-1] != '.' {
		return
	}
	line := bytes.Count(src[:i-1], []byte("\n"))
	start := bytes.LastIndexByte(src[:i-1], '\n') + 1
	e.Msg = "expected a field name after '.'"
	e.Pos.Line, e.Pos.Col = int32(line+1), int32(utf8.RuneCount(src[start:i-1])+1)
}

// offsetOf returns the byte offset in src of pos (line and column in runes,
// from 1), or len(src).
func offsetOf(src []byte, pos syntax.Position) int {
	off := 0
	for line := int32(1); line < pos.Line; line++ {
		j := bytes.IndexByte(src[off:], '\n')
		if j < 0 {
			return len(src)
		}
		off += j + 1
	}
	for col := int32(1); col < pos.Col && off < len(src) && src[off] != '\n'; col++ {
		_, size := utf8.DecodeRune(src[off:])
		off += size
	}
	return off
}
