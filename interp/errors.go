package interp

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Error is a mistake in a configuration or a plug, or a failure of plug
// code: it says where (file:line:col), which plug and handler, and carries
// the Starlark backtrace when there is one.
type Error struct {
	Pos       syntax.Position
	Plug      string // plug name, when the error belongs to a plug
	Handler   string // handler name, when it happened in one
	Msg       string
	Backtrace string // "Traceback (most recent call last): …", or empty
	cause     error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	if e.Plug != "" {
		fmt.Fprintf(&b, "plug %s: ", e.Plug)
	}
	if e.Handler != "" {
		b.WriteString(e.Handler)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Backtrace != "" {
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(e.Backtrace, "\n"))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.cause }

// Errorf makes an Error at pos.
func Errorf(pos syntax.Position, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// WrapError turns err, as returned by the Starlark interpreter, into an
// Error naming plug and handler. The position is the innermost frame of
// Starlark code; the backtrace is the Starlark call stack.
func WrapError(err error, plug, handler string) *Error {
	if e, ok := err.(*Error); ok {
		c := *e
		if c.Plug == "" {
			c.Plug = plug
		}
		if c.Handler == "" {
			c.Handler = handler
		}
		return &c
	}
	out := &Error{Plug: plug, Handler: handler, Msg: err.Error(), cause: err}
	var evalErr *starlark.EvalError
	var synErr syntax.Error
	var resErrs resolve.ErrorList
	switch {
	case errors.As(err, &evalErr):
		// A builtin that knows a better position says so with an *Error.
		if e, ok := evalErr.Unwrap().(*Error); ok && e.Pos.IsValid() {
			return WrapError(e, plug, handler)
		}
		out.Msg = evalErr.Msg
		stack := evalErr.CallStack
		// The builtin that failed is named in the message already.
		if n := len(stack); n > 0 && stack[n-1].Pos.Filename() == "<builtin>" {
			if stack[n-1].Name == "fail" {
				out.Msg = strings.TrimPrefix(out.Msg, "fail: ")
			}
			stack = stack[:n-1]
		}
		if n := len(stack); n > 0 {
			out.Pos = stack[n-1].Pos
		}
		if len(stack) > 1 {
			out.Backtrace = stack.String()
		}
	case errors.As(err, &synErr):
		out.Pos, out.Msg = synErr.Pos, synErr.Msg
	case errors.As(err, &resErrs) && len(resErrs) > 0:
		out.Pos = resErrs[0].Pos
		msgs := make([]string, len(resErrs))
		for i, r := range resErrs {
			msgs[i] = r.Msg
			if i > 0 {
				msgs[i] = r.Pos.String() + ": " + r.Msg
			}
		}
		out.Msg = strings.Join(msgs, "\n")
	}
	return out
}

// Errors are the independent mistakes of a file and the files it uses,
// all found in one pass, in the order Sort gives them.
type Errors []*Error

// ErrorsIn returns the mistakes err is or wraps: an Errors, or one Error
// as a list of one; nil when it holds none.
func ErrorsIn(err error) Errors {
	var list Errors
	if errors.As(err, &list) {
		return list
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	return nil
}

// Error lists the mistakes, one a line.
func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.As and errors.Is see each mistake.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Sort orders the mistakes by file, then position; mistakes at one
// position (those of a plug, reported at its use) keep their order.
func (es Errors) Sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		if c := strings.Compare(a.Pos.Filename(), b.Pos.Filename()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Col, b.Pos.Col)
	})
}

// add appends err to es: each mistake of Errors, an *Error as it is,
// another error as an *Error at pos.
func (es *Errors) add(err error, pos syntax.Position) {
	var list Errors
	var e *Error
	switch {
	case errors.As(err, &list):
		*es = append(*es, list...)
	case errors.As(err, &e):
		*es = append(*es, e)
	default:
		*es = append(*es, &Error{Pos: pos, Msg: err.Error(), cause: err})
	}
}

// err returns es sorted, or nil when there is no mistake.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	es.Sort()
	return es
}
