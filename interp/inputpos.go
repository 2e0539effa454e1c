package interp

import (
	"strconv"
	"strings"

	"go.starlark.net/syntax"
)

// callAt returns the call of f whose parenthesis is at pos (where the
// interpreter places a call), or nil.
func callAt(f *syntax.File, pos syntax.Position) *syntax.CallExpr {
	if f == nil {
		return nil
	}
	var found *syntax.CallExpr
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && c.Lparen.Line == pos.Line && c.Lparen.Col == pos.Col {
			found = c
		}
		return found == nil
	})
	return found
}

// inputPos returns where the call of use() writes the value a problem of
// its inputs is about: the value itself, the key of an unknown field, or
// the innermost dict or list written out on the problem's path; else pos.
func inputPos(call *syntax.CallExpr, p Problem, pos syntax.Position) syntax.Position {
	if call == nil {
		return pos
	}
	var x syntax.Expr
	for _, a := range call.Args {
		if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			if id, ok := b.X.(*syntax.Ident); ok && id.Name == "inputs" {
				x = b.Y
			}
		}
	}
	if x == nil {
		return pos
	}
	path, ok := strings.CutPrefix(p.Path, "inputs")
	if !ok {
		return start(x)
	}
	for path != "" {
		var key syntax.Expr
		var next syntax.Expr
		switch {
		case path[0] == '.':
			name := path[1:]
			if i := strings.IndexAny(name, ".["); i >= 0 {
				name = name[:i]
			}
			path = path[1+len(name):]
			key, next = entry(x, name)
		case strings.HasPrefix(path, `["`): // a key that is no name: labels["team name"]
			q, err := strconv.QuotedPrefix(path[1:])
			name, err2 := strconv.Unquote(q)
			if err != nil || err2 != nil || !strings.HasPrefix(path[1+len(q):], "]") {
				return start(x)
			}
			path = path[2+len(q):]
			key, next = entry(x, name)
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return start(x)
			}
			i, err := strconv.Atoi(path[1:end])
			path = path[end+1:]
			if elems := elements(x); err == nil && i < len(elems) {
				next = elems[i]
			}
		default:
			return start(x)
		}
		if next == nil {
			return start(x)
		}
		if path == "" && key != nil && strings.HasPrefix(p.Msg, "unknown field") {
			return start(key)
		}
		x = next
	}
	return start(x)
}

// entry returns the key and value of field name in a dict written out as
// {"name": …} or dict(name = …), or nils.
func entry(x syntax.Expr, name string) (key, value syntax.Expr) {
	switch x := x.(type) {
	case *syntax.DictExpr:
		for _, e := range x.List {
			e := e.(*syntax.DictEntry)
			if lit, ok := e.Key.(*syntax.Literal); ok && lit.Value == name {
				return e.Key, e.Value
			}
		}
	case *syntax.CallExpr:
		for _, a := range x.Args {
			if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
				if id, ok := b.X.(*syntax.Ident); ok && id.Name == name {
					return id, b.Y
				}
			}
		}
	case *syntax.ParenExpr:
		return entry(x.X, name)
	}
	return nil, nil
}

// elements returns the elements of a list or tuple written out, or nil.
func elements(x syntax.Expr) []syntax.Expr {
	switch x := x.(type) {
	case *syntax.ListExpr:
		return x.List
	case *syntax.TupleExpr:
		return x.List
	case *syntax.ParenExpr:
		return elements(x.X)
	}
	return nil
}

func start(n syntax.Node) syntax.Position {
	p, _ := n.Span()
	return p
}
