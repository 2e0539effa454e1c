package lsp

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/syntax"
)

// A problem is a diagnostic before it becomes LSP's: Line and Col from 1,
// in the document; Line 0 when the position lies in another file.
type problem struct {
	Line, Col int
	Msg       string
	Warning   bool // a warning of check's, not an error
}

// fileKind is what a .star file is, which decides how it is loaded.
type fileKind int

const (
	moduleFile fileKind = iota // reached by load()
	plugFile                   // calls plug()
	configFile                 // calls agent() or setup()
)

var (
	plugCall   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^plug\s*\(`) })
	configCall = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^(agent|setup)\s*\(`) })
)

// kindOf tells the kind of a file by its top-level calls, in the text
// (which need not parse) or, for a file without them, by its name.
func kindOf(path, text string) fileKind {
	switch {
	case plugCall().MatchString(text):
		return plugFile
	case configCall().MatchString(text) || filepath.Base(path) == "blaise.star":
		return configFile
	}
	return moduleFile
}

// load loads the file at path as check and run would, with overlay for
// the open documents, and returns its plug (for a plug file that loads) and
// the error, with the message of `blaise-agent check`.
func load(newLoader func() *interp.Loader, overlay map[string][]byte, path string, kind fileKind) (*interp.Plug, []problem, error) {
	l := newLoader()
	l.Overlay, l.Vet = overlay, true
	var plug *interp.Plug
	var err error
	switch kind {
	case plugFile:
		plug, err = l.LoadPlug(path)
	case configFile:
		_, err = l.LoadConfig(path)
	default:
		err = l.LoadModule(path)
	}
	// check's warnings of this file; those of the plugs it uses show in
	// theirs.
	var warnings []problem
	for _, w := range l.Warnings() {
		if p, here := placed(w, path); here {
			p.Warning = true
			warnings = append(warnings, p)
		}
	}
	return plug, warnings, err
}

// problemsOf places each mistake of err in the document at path: at its
// position when it is in that file, else on the first line with the whole
// message. (A mistake in a plug or module the document uses is reported at
// the use() or load() by the loader itself.)
func problemsOf(err error, path string) []problem {
	list := interp.ErrorsIn(err)
	if list == nil {
		return []problem{{Msg: err.Error()}}
	}
	out := make([]problem, len(list))
	for i, e := range list {
		out[i], _ = placed(e, path)
	}
	return out
}

// placed is the problem of e in the document at path: at its position
// when it is in that file (here), else with the whole message.
func placed(e *interp.Error, path string) (p problem, here bool) {
	if abs, _ := filepath.Abs(e.Pos.Filename()); e.Pos.IsValid() && abs == path {
		return problem{Line: int(e.Pos.Line), Col: int(e.Pos.Col), Msg: strings.TrimPrefix(e.Error(), e.Pos.String()+": ")}, true
	}
	return problem{Msg: e.Error()}, false
}

// attrProblems finds the reads of attributes that ctx, message, hosts and
// the values reached from them do not have, which a run would fail on.
func attrProblems(f *syntax.File, top *scope) []problem {
	c := &attrChecker{}
	c.stmts(f.Stmts, top, true)
	return c.found
}

type attrChecker struct{ found []problem }

func (c *attrChecker) stmts(list []syntax.Stmt, s *scope, topLevel bool) {
	for _, st := range list {
		switch st := st.(type) {
		case *syntax.DefStmt:
			for _, p := range st.Params {
				c.exprs(p, s)
			}
			s.assign(st)
			c.stmts(st.Body, s.function(st.Name.Name, st.Params, topLevel), false)
			continue
		case *syntax.IfStmt:
			c.exprs(st.Cond, s)
			c.stmts(st.True, s, false)
			c.stmts(st.False, s, false)
			continue
		case *syntax.ForStmt:
			c.exprs(st.X, s)
			c.stmts(st.Body, s, false)
			continue
		case *syntax.WhileStmt:
			c.exprs(st.Cond, s)
			c.stmts(st.Body, s, false)
			continue
		}
		c.exprs(st, s)
		s.assign(st)
	}
}

// exprs checks the attribute reads of n, a statement without a body or an
// expression.
func (c *attrChecker) exprs(n syntax.Node, s *scope) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.LambdaExpr, *syntax.Comprehension:
			return false // their own scopes; not worth the guess
		case *syntax.DotExpr:
			if msg := s.m.unknownAttr(s.typeOf(n.X), n.Name.Name); msg != "" {
				c.found = append(c.found, problem{Line: int(n.Name.NamePos.Line), Col: int(n.Name.NamePos.Col), Msg: msg})
			}
		}
		return true
	})
}
