package interp

import "go.starlark.net/syntax"

// dictTests finds the tests type(x) == "dict" (or !=) in the functions of
// f where x comes from a message (it reads .params, .result or .error, or
// a name assigned or looped over from such a value in the same function):
// a message's JSON objects are objects, so such a test, written when they
// were dicts, no longer holds. A plug that still tests it silently skips
// the work (a redactor that stops redacting).
func dictTests(f *syntax.File) []syntax.Position {
	var found []syntax.Position
	syntax.Walk(f, func(n syntax.Node) bool {
		def, ok := n.(*syntax.DefStmt)
		if !ok {
			return true
		}
		tainted := messageNames(def.Body)
		syntax.Walk(def, func(n syntax.Node) bool {
			if x, ok := n.(*syntax.BinaryExpr); ok && (x.Op == syntax.EQL || x.Op == syntax.NEQ) {
				if (isDictLiteral(x.Y) && fromMessage(typeArg(x.X), tainted)) || (isDictLiteral(x.X) && fromMessage(typeArg(x.Y), tainted)) {
					pos, _ := x.Span()
					found = append(found, pos)
				}
			}
			return true
		})
		return false // nested functions were walked with their parent
	})
	return found
}

// messageNames returns the names that body assigns, or loops over, from a
// value that comes from a message, until no more are found.
func messageNames(body []syntax.Stmt) map[string]bool {
	type binding struct {
		name string
		from syntax.Expr
	}
	var bindings []binding
	for _, stmt := range body {
		syntax.Walk(stmt, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.AssignStmt:
				if id, ok := n.LHS.(*syntax.Ident); ok && !isCall(n.RHS, "dict") {
					bindings = append(bindings, binding{id.Name, n.RHS})
				}
			case *syntax.ForStmt:
				if id, ok := n.Vars.(*syntax.Ident); ok {
					bindings = append(bindings, binding{id.Name, n.X})
				}
			}
			return true
		})
	}
	tainted := map[string]bool{}
	for grew := true; grew; {
		grew = false
		for _, b := range bindings {
			if !tainted[b.name] && fromMessage(b.from, tainted) {
				tainted[b.name], grew = true, true
			}
		}
	}
	return tainted
}

// fromMessage reports whether x reads a message's body or a tainted name.
func fromMessage(x syntax.Expr, tainted map[string]bool) bool {
	if x == nil {
		return false
	}
	var from bool
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.DotExpr:
			from = from || n.Name.Name == "params" || n.Name.Name == "result" || n.Name.Name == "error"
		case *syntax.Ident:
			from = from || tainted[n.Name]
		}
		return !from
	})
	return from
}

// typeArg returns x of type(x), or nil.
func typeArg(e syntax.Expr) syntax.Expr {
	if call, ok := e.(*syntax.CallExpr); ok && isCall(e, "type") && len(call.Args) == 1 {
		return call.Args[0]
	}
	return nil
}

func isCall(e syntax.Expr, fn string) bool {
	call, ok := e.(*syntax.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fn.(*syntax.Ident)
	return ok && id.Name == fn
}

func isDictLiteral(e syntax.Expr) bool {
	lit, ok := e.(*syntax.Literal)
	return ok && lit.Token == syntax.STRING && lit.Value == "dict"
}
