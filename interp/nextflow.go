package interp

import "go.starlark.net/syntax"

// counts is a set of how many times next() has been called on the paths
// that reach a point of a handler: bit 0 for none, 1 for once, 2 for
// twice or more. The empty set is a point no path reaches.
type counts uint8

const (
	none  counts = 1 << iota // next() not called yet
	once                     // called once
	twice                    // called twice or more
)

// called is s after one more call.
func (s counts) called() counts {
	out := s&none<<1 | s&once<<1 | s&twice
	return out & (none | once | twice)
}

// nextFlow follows the calls of next() through the body of a handler. It
// reports only what is certain on every path that gets there: a call made
// after next() was called already, a return without a call before it. It
// gives up on a handler that uses next otherwise than by calling it
// (passes it to a helper, rebinds it, calls it from a nested function).
type nextFlow struct {
	next      string // the name of the parameter
	handler   string
	quiet     int  // > 0 while a loop's state settles: no reports
	once      bool // the handler must call next() exactly once, not at most once
	gaveUp    bool
	found     []*Error
	seen      map[syntax.Position]bool
	breaks    counts // the states at the breaks of the innermost loop
	continues counts
}

// nextMistakes finds the certain mistakes of the calls of next() in the
// handlers of f: twice on a path (every handler), and, in on_session and
// on_teardown, which must call it exactly once, a return without a call.
func nextMistakes(f *syntax.File, plug string) []*Error {
	var out []*Error
	for _, st := range f.Stmts {
		def, ok := st.(*syntax.DefStmt)
		if !ok {
			continue
		}
		i, once := 0, false
		switch def.Name.Name {
		case "on_session", "on_teardown":
			i, once = 1, true
		case "on_message":
			i = 2
		default:
			continue
		}
		if len(def.Params) <= i {
			continue
		}
		id, ok := def.Params[i].(*syntax.Ident)
		if !ok {
			continue
		}
		nf := &nextFlow{next: id.Name, handler: def.Name.Name, once: once, seen: map[syntax.Position]bool{}}
		if end := nf.stmts(def.Body, none); once && end == none {
			nf.report(def.Def, "reaches its end without calling next() on any path; call next() exactly once")
		}
		if nf.gaveUp {
			continue
		}
		for _, e := range nf.found {
			e.Plug = plug
		}
		out = append(out, nf.found...)
	}
	return out
}

func (nf *nextFlow) report(pos syntax.Position, msg string) {
	if nf.quiet > 0 || nf.seen[pos] {
		return
	}
	nf.seen[pos] = true
	nf.found = append(nf.found, &Error{Pos: pos, Msg: nf.handler + ": " + msg})
}

// stmts returns the state after list, which is entered in state s; the
// empty set when no path goes on after it.
func (nf *nextFlow) stmts(list []syntax.Stmt, s counts) counts {
	for _, st := range list {
		s = nf.stmt(st, s)
	}
	return s
}

func (nf *nextFlow) stmt(st syntax.Stmt, s counts) counts {
	switch st := st.(type) {
	case *syntax.ExprStmt:
		s = nf.expr(st.X, s)
		if call, ok := st.X.(*syntax.CallExpr); ok {
			if id, ok := call.Fn.(*syntax.Ident); ok && id.Name == "fail" {
				return 0 // failing on purpose ends the path
			}
		}
		return s
	case *syntax.AssignStmt:
		s = nf.expr(st.RHS, s)
		nf.binds(st.LHS)
		return nf.expr(st.LHS, s)
	case *syntax.ReturnStmt:
		if st.Result != nil {
			s = nf.expr(st.Result, s)
		}
		if nf.once && s == none {
			nf.report(st.Return, "returns here without calling next(): no path to this return calls it; call next() exactly once")
		}
		return 0
	case *syntax.IfStmt:
		s = nf.expr(st.Cond, s)
		return nf.stmts(st.True, s) | nf.stmts(st.False, s)
	case *syntax.ForStmt:
		s = nf.expr(st.X, s)
		nf.binds(st.Vars)
		return nf.loop(st.Body, s, nil, false)
	case *syntax.WhileStmt:
		forever := false
		if id, ok := st.Cond.(*syntax.Ident); ok && id.Name == "True" {
			forever = true
		}
		return nf.loop(st.Body, s, st.Cond, forever)
	case *syntax.BranchStmt:
		switch st.Token {
		case syntax.BREAK:
			nf.breaks |= s
			return 0
		case syntax.CONTINUE:
			nf.continues |= s
			return 0
		}
		return s // pass
	case *syntax.DefStmt:
		nf.binds(st.Name)
		if mentions(st, nf.next) {
			nf.gaveUp = true
		}
		return s
	case *syntax.LoadStmt:
		return s
	}
	nf.gaveUp = true // a statement this does not know
	return s
}

// loop returns the state after a loop whose body is entered in state s
// and after each pass, and left before a pass (unless forever) or by
// break. The state at the head only grows, so it settles within three
// passes; the pass at the settled state reports.
func (nf *nextFlow) loop(body []syntax.Stmt, s counts, cond syntax.Expr, forever bool) counts {
	outerBreaks, outerContinues := nf.breaks, nf.continues
	head := s
	nf.quiet++
	for range 3 {
		nf.breaks, nf.continues = 0, 0
		after := nf.stmts(body, nf.expr(cond, head))
		if head|after|nf.continues == head {
			break
		}
		head |= after | nf.continues
	}
	nf.quiet--
	nf.breaks = 0
	h := nf.expr(cond, head)
	nf.stmts(body, h)
	out := nf.breaks
	if !forever {
		out |= h
	}
	nf.breaks, nf.continues = outerBreaks, outerContinues
	return out
}

// binds gives up when an assignment rebinds next.
func (nf *nextFlow) binds(lhs syntax.Expr) {
	syntax.Walk(lhs, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok && id.Name == nf.next {
			nf.gaveUp = true
		}
		return true
	})
}

// expr returns the state after evaluating e in state s, in the order of
// evaluation; a part evaluated only on some paths joins both.
func (nf *nextFlow) expr(e syntax.Expr, s counts) counts {
	switch e := e.(type) {
	case nil:
		return s
	case *syntax.CallExpr:
		id, isNext := e.Fn.(*syntax.Ident)
		isNext = isNext && id.Name == nf.next
		if !isNext {
			s = nf.expr(e.Fn, s)
		}
		for _, a := range e.Args {
			s = nf.expr(a, s)
		}
		if isNext {
			if s != 0 && s&none == 0 {
				nf.report(e.Lparen, "next() called again here: every path to this call has called it already; call it "+nf.times())
			}
			s = s.called()
		}
		return s
	case *syntax.Ident:
		if e.Name == nf.next {
			nf.gaveUp = true // next used as a value: passed on, kept
		}
		return s
	case *syntax.BinaryExpr:
		s = nf.expr(e.X, s)
		if e.Op == syntax.AND || e.Op == syntax.OR {
			return s | nf.expr(e.Y, s)
		}
		return nf.expr(e.Y, s)
	case *syntax.CondExpr:
		s = nf.expr(e.Cond, s)
		return nf.expr(e.True, s) | nf.expr(e.False, s)
	case *syntax.UnaryExpr:
		return nf.expr(e.X, s)
	case *syntax.ParenExpr:
		return nf.expr(e.X, s)
	case *syntax.DotExpr:
		return nf.expr(e.X, s)
	case *syntax.IndexExpr:
		return nf.expr(e.Y, nf.expr(e.X, s))
	case *syntax.SliceExpr:
		return nf.exprs([]syntax.Expr{e.X, e.Lo, e.Hi, e.Step}, s)
	case *syntax.ListExpr:
		return nf.exprs(e.List, s)
	case *syntax.TupleExpr:
		return nf.exprs(e.List, s)
	case *syntax.DictExpr:
		return nf.exprs(e.List, s)
	case *syntax.DictEntry:
		return nf.expr(e.Value, nf.expr(e.Key, s))
	case *syntax.Literal:
		return s
	case *syntax.LambdaExpr, *syntax.Comprehension:
		if mentions(e, nf.next) {
			nf.gaveUp = true
		}
		return s
	}
	nf.gaveUp = true
	return s
}

// exprs returns the state after evaluating list in order.
func (nf *nextFlow) exprs(list []syntax.Expr, s counts) counts {
	for _, x := range list {
		s = nf.expr(x, s)
	}
	return s
}

func (nf *nextFlow) times() string {
	if nf.once {
		return "exactly once"
	}
	return "at most once"
}

// mentions reports whether name occurs in n.
func mentions(n syntax.Node, name string) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if id, ok := n.(*syntax.Ident); ok && id.Name == name {
			found = true
		}
		return !found
	})
	return found
}
