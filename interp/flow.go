package interp

import "go.starlark.net/syntax"

// fallThrough finds the places where the body of the top-level function
// name in f can end without a return: the statement each such path ends
// with. A path ends for good with a return or a call of fail().
func fallThrough(f *syntax.File, name string) []syntax.Position {
	for _, stmt := range f.Stmts {
		if def, ok := stmt.(*syntax.DefStmt); ok && def.Name.Name == name {
			if ends, exits := endsBlock(def.Body); !ends {
				return exits
			}
			return nil
		}
	}
	return nil
}

// endsBlock reports whether every path through stmts returns or fails;
// when not, exits are the statements the other paths end with.
func endsBlock(stmts []syntax.Stmt) (ends bool, exits []syntax.Position) {
	for _, s := range stmts {
		if ends, _ := endsStmt(s); ends {
			return true, nil // what follows is never reached
		}
	}
	if len(stmts) == 0 {
		return false, nil
	}
	return endsStmt(stmts[len(stmts)-1])
}

func endsStmt(s syntax.Stmt) (bool, []syntax.Position) {
	start, _ := s.Span()
	switch s := s.(type) {
	case *syntax.ReturnStmt:
		return true, nil
	case *syntax.ExprStmt:
		if call, ok := s.X.(*syntax.CallExpr); ok {
			if id, ok := call.Fn.(*syntax.Ident); ok && id.Name == "fail" {
				return true, nil
			}
		}
	case *syntax.IfStmt:
		thenEnds, thenExits := endsBlock(s.True)
		if len(s.False) == 0 {
			// Without an else, the condition being false falls through
			// at the if itself.
			return false, append(thenExits, start)
		}
		elseEnds, elseExits := endsBlock(s.False)
		return thenEnds && elseEnds, append(thenExits, elseExits...)
	}
	return false, []syntax.Position{start}
}

// checkFlow finds what the handlers' code shows before a run: the calls of
// next() that are certainly wrong (Mistakes); and warns of an on_message
// that can end without a return: a request that gets there is answered
// with an error at run time.
func checkFlow(p *Plug, file string, src []byte) {
	f, err := FileOptions.Parse(file, src, 0)
	if err != nil {
		return
	}
	p.Mistakes = nextMistakes(f, p.Name)
	if p.OnMessage == nil {
		return
	}
	p.OnMessageFallsThrough = fallThrough(f, "on_message")
	for _, pos := range p.OnMessageFallsThrough {
		p.Warnings = append(p.Warnings, &Error{Pos: pos, Plug: p.Name, Msg: "on_message can reach its end from here without a return: a request that does is answered with an error; end the path with return next(message) (notifications need no return)"})
	}
}
