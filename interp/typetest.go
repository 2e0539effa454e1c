package interp

import (
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// typeOf is type(x) in every file: the JSON objects of a message answer
// "dict", as they did before they read with dots, so that a plug testing
// type(params) == "dict" keeps matching them.
var typeOf = starlark.NewBuiltin("type", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	if _, ok := x.(*Object); ok {
		return starlark.String("dict"), nil
	}
	return starlark.String(x.Type()), nil
})

// objectTests rewrites the tests of f that compare what type() gave with
// "object" (==, !=, in and not in a literal tuple or list) to compare with
// "dict", and returns where they are. A message's JSON objects answered
// "object" for a while; plugs written then keep working, and check warns.
// What type() gave is a call of type, or a name the same function (or
// the file) assigns only from such calls.
func objectTests(f *syntax.File) []syntax.Position {
	var found []syntax.Position
	rewrite := func(lit syntax.Expr) {
		if l, ok := lit.(*syntax.Literal); ok && l.Token == syntax.STRING && l.Value == "object" {
			l.Value, l.Raw = "dict", `"dict"`
			found = append(found, l.TokenPos)
		}
	}
	var visit func(body []syntax.Stmt, names map[string]bool)
	visit = func(body []syntax.Stmt, outer map[string]bool) {
		names := typeNames(body, outer)
		for _, stmt := range body {
			syntax.Walk(stmt, func(n syntax.Node) bool {
				switch n := n.(type) {
				case *syntax.DefStmt:
					visit(n.Body, without(names, n.Params))
					return false
				case *syntax.BinaryExpr:
					switch n.Op {
					case syntax.EQL, syntax.NEQ:
						if isTypeOf(n.X, names) {
							rewrite(n.Y)
						} else if isTypeOf(n.Y, names) {
							rewrite(n.X)
						}
					case syntax.IN, syntax.NOT_IN:
						if isTypeOf(n.X, names) {
							for _, e := range literalElems(n.Y) {
								rewrite(e)
							}
						}
					}
				}
				return true
			})
		}
	}
	visit(f.Stmts, nil)
	return found
}

// typeNames returns the names of outer that body does not assign, and
// those body assigns only from calls of type.
func typeNames(body []syntax.Stmt, outer map[string]bool) map[string]bool {
	fromType := map[string]bool{}
	other := map[string]bool{}
	for _, stmt := range body {
		syntax.Walk(stmt, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.DefStmt:
				other[n.Name.Name] = true
				return false
			case *syntax.AssignStmt:
				if id, ok := n.LHS.(*syntax.Ident); ok {
					if n.Op == syntax.EQ && isTypeOf(n.RHS, nil) {
						fromType[id.Name] = true
					} else {
						other[id.Name] = true
					}
				}
			case *syntax.ForStmt:
				if id, ok := n.Vars.(*syntax.Ident); ok {
					other[id.Name] = true
				}
			}
			return true
		})
	}
	names := map[string]bool{}
	for k := range outer {
		if !fromType[k] && !other[k] {
			names[k] = true
		}
	}
	for k := range fromType {
		if !other[k] {
			names[k] = true
		}
	}
	return names
}

// without returns names without the parameters params declares.
func without(names map[string]bool, params []syntax.Expr) map[string]bool {
	inner := make(map[string]bool, len(names))
	for k := range names {
		inner[k] = true
	}
	for _, p := range params {
		switch p := p.(type) {
		case *syntax.BinaryExpr: // name = default
			p0, _ := p.X.(*syntax.Ident)
			if p0 != nil {
				delete(inner, p0.Name)
			}
		case *syntax.UnaryExpr: // *args, **kwargs
			if id, ok := p.X.(*syntax.Ident); ok {
				delete(inner, id.Name)
			}
		case *syntax.Ident:
			delete(inner, p.Name)
		}
	}
	return inner
}

// isTypeOf reports whether e is a call type(x) or one of names.
func isTypeOf(e syntax.Expr, names map[string]bool) bool {
	switch e := e.(type) {
	case *syntax.CallExpr:
		id, ok := e.Fn.(*syntax.Ident)
		return ok && id.Name == "type" && len(e.Args) == 1
	case *syntax.Ident:
		return names[e.Name]
	case *syntax.ParenExpr:
		return isTypeOf(e.X, names)
	}
	return false
}

// literalElems returns the elements of a literal tuple or list.
func literalElems(e syntax.Expr) []syntax.Expr {
	switch e := e.(type) {
	case *syntax.ParenExpr:
		return literalElems(e.X)
	case *syntax.TupleExpr:
		return e.List
	case *syntax.ListExpr:
		return e.List
	}
	return nil
}
