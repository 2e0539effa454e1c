package lsp

import (
	"regexp"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/syntax"
)

// handlerParams are the types of the parameters of each handler, by
// position; next gives what calling it returns.
var handlerParams = map[string][]typ{
	"on_session":  {{name: "ctx"}, {name: nextPrefix + "PauseInfo"}},
	"on_teardown": {{name: "ctx"}, {name: nextPrefix + "TeardownInfo"}},
	"on_message":  {{name: "ctx"}, {name: "message"}, {name: nextPrefix + "message"}},
	"on_load":     {{name: "ctx"}},
	"on_migrate":  {{name: "ctx"}},
}

// A scope maps names to types: the parameters and variables of a
// function, or the globals of a file. Predeclared modules are found last.
type scope struct {
	m      *model
	plug   *interp.Plug // the file's plug, for the schemas of ctx.inputs and ctx.persisted.value; may be nil
	vars   map[string]typ
	parent *scope
}

func newScope(parent *scope) *scope {
	return &scope{m: parent.m, plug: parent.plug, vars: map[string]typ{}, parent: parent}
}

// function returns the scope of def name(params), a handler when top-level.
func (s *scope) function(name string, params []syntax.Expr, topLevel bool) *scope {
	fn := newScope(s)
	types := handlerParams[name]
	for i, p := range params {
		id := paramName(p)
		if id == "" {
			continue
		}
		var t typ
		switch {
		case topLevel && i < len(types):
			t = types[i]
		case id == "ctx":
			t = typ{name: "ctx"} // a helper that takes the ctx of a handler
		}
		fn.vars[id] = t
	}
	return fn
}

func paramName(p syntax.Expr) string {
	switch p := p.(type) {
	case *syntax.Ident:
		return p.Name
	case *syntax.BinaryExpr: // name = default
		if id, ok := p.X.(*syntax.Ident); ok {
			return id.Name
		}
	case *syntax.UnaryExpr: // *args, **kwargs
		if id, ok := p.X.(*syntax.Ident); ok {
			return id.Name
		}
	}
	return ""
}

func (s *scope) lookup(name string) typ {
	for sc := s; sc != nil; sc = sc.parent {
		if t, ok := sc.vars[name]; ok {
			return t
		}
	}
	if s.m.modules[name] {
		return typ{name: name}
	}
	return typ{}
}

func (s *scope) schemas() (inputs, persisted *interp.Schema) {
	if s.plug == nil {
		return nil, nil
	}
	return s.plug.Inputs, s.plug.Persisted
}

// typeOf returns the type of e in s.
func (s *scope) typeOf(e syntax.Expr) typ {
	switch e := e.(type) {
	case *syntax.Ident:
		return s.lookup(e.Name)
	case *syntax.ParenExpr:
		return s.typeOf(e.X)
	case *syntax.DotExpr:
		in, pe := s.schemas()
		return s.m.attr(s.typeOf(e.X), e.Name.Name, in, pe)
	case *syntax.CallExpr:
		switch fn := e.Fn.(type) {
		case *syntax.Ident:
			if t := s.lookup(fn.Name); strings.HasPrefix(t.name, nextPrefix) {
				return s.m.call(t, "")
			}
		case *syntax.DotExpr:
			return s.m.call(s.typeOf(fn.X), fn.Name.Name)
		}
	}
	return typ{}
}

// assign records the type of what a statement binds.
func (s *scope) assign(st syntax.Stmt) {
	switch st := st.(type) {
	case *syntax.AssignStmt:
		if id, ok := st.LHS.(*syntax.Ident); ok {
			t := typ{}
			if st.Op == syntax.EQ {
				t = s.typeOf(st.RHS)
			}
			s.vars[id.Name] = t
		}
	case *syntax.LoadStmt:
		for _, id := range st.To {
			s.vars[id.Name] = typ{}
		}
	case *syntax.DefStmt:
		s.vars[st.Name.Name] = typ{}
	}
}

var (
	defLine    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)def\s+([A-Za-z_]\w*)\s*\((.*)\)\s*:`) })
	assignLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)([A-Za-z_]\w*)\s*=\s*([^=].*)$`) })
)

// textScope is the scope at line of a document being edited, which need
// not parse: the parameters of the def the line is in, and the variables
// assigned above it in that def and at the top level.
func textScope(top *scope, lines []string, line int) *scope {
	cur := indentOf(lines[line])
	defAt, defIndent := -1, 0
	for i := line; i >= 0; i-- {
		if m := defLine().FindStringSubmatch(lines[i]); m != nil && (len(m[1]) < cur || i == line) {
			defAt, defIndent = i, len(m[1])
			break
		}
	}
	fn := top
	if defAt >= 0 {
		m := defLine().FindStringSubmatch(lines[defAt])
		f, err := syntax.Parse("", "def f("+m[3]+"): pass\n", 0)
		var params []syntax.Expr
		if err == nil {
			params = f.Stmts[0].(*syntax.DefStmt).Params
		}
		fn = top.function(m[2], params, defIndent == 0)
	}
	for i := 0; i < line; i++ {
		m := assignLine().FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		target := top
		if i > defAt && defAt >= 0 && len(m[1]) > defIndent {
			target = fn
		} else if len(m[1]) > 0 {
			continue
		}
		rhs, err := syntax.ParseExpr("", m[3], 0)
		t := typ{}
		if err == nil {
			t = target.typeOf(rhs)
		}
		target.vars[m[2]] = t
	}
	return fn
}

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " \t")) }

// chainBefore returns the expression that ends at col of line: names,
// dots, and calls or indexes with their brackets, as in
// `ctx.host.spawn(["x"]).re` (for completion).
func chainBefore(line string, col int) string {
	if col > len(line) {
		col = len(line)
	}
	i, depth := col, 0
	for i > 0 {
		c := line[i-1]
		switch {
		case c == ')' || c == ']':
			depth++
		case (c == '(' || c == '[') && depth > 0:
			depth--
		case depth > 0, isIdent(c), c == '.':
		default:
			return line[i:col]
		}
		i--
	}
	return line[:col]
}

func isIdent(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// wordEnd returns the end of the identifier that col is in.
func wordEnd(line string, col int) int {
	for col < len(line) && isIdent(line[col]) {
		col++
	}
	return col
}

// splitChain splits `a.b(x).c` into the expression before the last dot
// and the name after it; before is "" when there is no dot.
func splitChain(chain string) (before, last string) {
	i := strings.LastIndexByte(chain, '.')
	if i < 0 {
		return "", chain
	}
	return chain[:i], chain[i+1:]
}
