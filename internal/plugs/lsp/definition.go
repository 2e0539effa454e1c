package lsp

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
	"go.starlark.net/syntax"
)

// definition answers go to definition: on the reference of a load() or a
// use(), the file; on a name that load() binds, its definition in the
// module; on a global of the document, its definition there.
func (s *server) definition(u protocol.DocumentURI, pos protocol.Position) []protocol.Location {
	d := s.docs[u]
	if d == nil {
		return nil
	}
	f, err := interp.FileOptions.Parse(d.path, d.text, 0)
	if err != nil {
		return nil
	}
	inside := insideAt(d.text, pos)
	var found []protocol.Location
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil || found != nil || !inside(n) {
			return found == nil
		}
		switch n := n.(type) {
		case *syntax.LoadStmt:
			target := resolveRef(d.path, n.Module.Value)
			if target == "" {
				return false
			}
			if inside(n.Module) {
				found = s.locate(target, "")
			}
			for i, to := range n.To {
				if inside(to) {
					found = s.locate(target, n.From[i].Name)
				}
			}
			return false
		case *syntax.CallExpr:
			if lit := useRef(n); lit != nil && inside(lit) {
				if target := resolveRef(d.path, lit.Value); target != "" {
					found = s.locate(target, "plug")
				}
				return false
			}
		case *syntax.Ident:
			found = s.global(d, f, n.Name)
		}
		return true
	})
	return found
}

// insideAt returns whether a node of text holds pos.
func insideAt(text string, pos protocol.Position) func(syntax.Node) bool {
	l := lineOf(text, int(pos.Line))
	line, col := int32(pos.Line)+1, int32(runeOfByte(l, byteOfUTF16(l, int(pos.Character))))+1
	return func(n syntax.Node) bool {
		start, end := n.Span()
		return (start.Line < line || start.Line == line && start.Col <= col) &&
			(line < end.Line || line == end.Line && col <= end.Col)
	}
}

// useRef returns the reference of a use("REF", ...) call, or nil.
func useRef(call *syntax.CallExpr) *syntax.Literal {
	if fn, ok := call.Fn.(*syntax.Ident); ok && fn.Name == "use" && len(call.Args) > 0 {
		if lit, ok := call.Args[0].(*syntax.Literal); ok && lit.Token == syntax.STRING {
			return lit
		}
	}
	return nil
}

// global finds where the document defines or loads name at its top level.
func (s *server) global(d *document, f *syntax.File, name string) []protocol.Location {
	for _, st := range f.Stmts {
		if ld, ok := st.(*syntax.LoadStmt); ok {
			for i, to := range ld.To {
				if to.Name == name {
					if target := resolveRef(d.path, ld.Module.Value); target != "" {
						return s.locate(target, ld.From[i].Name)
					}
				}
			}
		}
	}
	if p, ok := topLevel(f, name); ok {
		return []protocol.Location{{URI: d.uri, Range: pointRange(p, d.text)}}
	}
	return nil
}

// resolveRef returns the absolute path of the file ref names, written in
// the file at from, or "" for what is no file (blaise:NAME).
func resolveRef(from string, ref any) string {
	r, ok := ref.(string)
	if !ok || r == "" || strings.HasPrefix(r, interp.StdlibPrefix) {
		return ""
	}
	if filepath.IsAbs(r) {
		return filepath.Clean(r)
	}
	return filepath.Join(filepath.Dir(from), r)
}

// locate returns where name is defined at the top level of the file at
// path (plug: its plug(...) call), or the file's start.
func (s *server) locate(path, name string) []protocol.Location {
	loc := protocol.Location{URI: uri.File(path)}
	text, ok := s.overlay()[path]
	if !ok {
		var err error
		if text, err = os.ReadFile(path); err != nil {
			return nil
		}
	}
	if name != "" {
		if f, err := interp.FileOptions.Parse(path, text, 0); err == nil {
			if p, ok := topLevel(f, name); ok {
				loc.Range = pointRange(p, string(text))
			}
		}
	}
	return []protocol.Location{loc}
}

// topLevel returns the position of the top-level def, assignment or call
// of name in f.
func topLevel(f *syntax.File, name string) (syntax.Position, bool) {
	for _, st := range f.Stmts {
		switch st := st.(type) {
		case *syntax.DefStmt:
			if st.Name.Name == name {
				return st.Name.NamePos, true
			}
		case *syntax.AssignStmt:
			if id, ok := st.LHS.(*syntax.Ident); ok && id.Name == name {
				return id.NamePos, true
			}
		case *syntax.ExprStmt:
			if call, ok := st.X.(*syntax.CallExpr); ok {
				if fn, ok := call.Fn.(*syntax.Ident); ok && fn.Name == name {
					return fn.NamePos, true
				}
			}
		}
	}
	return syntax.Position{}, false
}

// pointRange is the empty range at p, a position in text.
func pointRange(p syntax.Position, text string) protocol.Range {
	line := lineOf(text, int(p.Line)-1)
	pt := protocol.Position{Line: uint32(max(p.Line-1, 0)), Character: uint32(utf16OfByte(line, byteOfRune(line, int(p.Col)-1)))}
	return protocol.Range{Start: pt, End: pt}
}
