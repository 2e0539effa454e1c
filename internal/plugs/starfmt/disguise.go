package starfmt

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/bazelbuild/buildtools/build"
	"go.starlark.net/syntax"
)

// The dialect has two constructs that buildtools' parser does not know:
// while loops and bytes literals. Before buildtools formats a file, each is
// written as one it knows (for NAME in COND:, and NAME('…')) with a name
// the file does not use; after, those are found by position in the
// formatted text and written back.

// names are the stand-ins of one file.
type names struct{ while, bytes string }

// newNames picks stand-ins that do not occur in src.
func newNames(src []byte) names {
	for i := 0; ; i++ {
		n := names{fmt.Sprintf("_fmt_while%d_", i), fmt.Sprintf("_fmt_bytes%d_", i)}
		if !strings.Contains(string(src), n.while) && !strings.Contains(string(src), n.bytes) {
			return n
		}
	}
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// apply makes the edits, which must not overlap.
func apply(src []byte, edits []edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.Write(src[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.Write(src[last:])
	return []byte(b.String())
}

// offsets maps the positions of go.starlark.net (line, and column in
// runes, with \r\n and \r counted as one line break) to byte offsets.
type offsets struct {
	src   []byte
	lines []int // byte offset of the start of each line, from line 1
}

func newOffsets(src []byte) *offsets {
	o := &offsets{src: src, lines: []int{0}}
	for i := 0; i < len(src); i++ {
		switch {
		case src[i] == '\r' && i+1 < len(src) && src[i+1] == '\n':
			i++
			o.lines = append(o.lines, i+1)
		case src[i] == '\n' || src[i] == '\r':
			o.lines = append(o.lines, i+1)
		}
	}
	return o
}

func (o *offsets) of(p syntax.Position) int {
	off := o.lines[p.Line-1]
	for col := int32(1); col < p.Col; col++ {
		_, size := decodeRune(o.src[off:])
		off += size
	}
	return off
}

func decodeRune(b []byte) (rune, int) {
	for i, r := range string(b) {
		if i > 0 {
			return r, i
		}
	}
	return 0, len(b)
}

// disguise writes the while loops and bytes literals of f, parsed from
// src, as constructs buildtools knows.
func disguise(f *syntax.File, src []byte, n names) []byte {
	o := newOffsets(src)
	var edits []edit
	syntax.Walk(f, func(node syntax.Node) bool {
		switch x := node.(type) {
		case *syntax.WhileStmt:
			start := o.of(x.While)
			edits = append(edits, edit{start, start + len("while"), "for " + n.while + " in"})
		case *syntax.Literal:
			if x.Token == syntax.BYTES {
				// The bytes of the source, not x.Raw: invalid UTF-8 is
				// replaced there.
				startPos, endPos := x.Span()
				start, end := o.of(startPos), o.of(endPos)
				raw := strings.Replace(string(src[start:end]), "b", "", 1) // b'…' or rb'…'
				edits = append(edits, edit{start, end, n.bytes + "(" + raw + ")"})
			}
		}
		return true
	})
	return apply(src, edits)
}

// restore writes back, in out, formatted by buildtools, what disguise
// wrote; the result is checked by the caller.
func restore(path string, out []byte, n names) ([]byte, error) {
	f, err := build.ParseDefault(path, out)
	if err != nil {
		return nil, err
	}
	lines := newOffsets(out).lines
	var edits []edit
	build.Walk(f, func(x build.Expr, _ []build.Expr) {
		switch x := x.(type) {
		case *build.ForStmt:
			if id, ok := x.Vars.(*build.Ident); ok && id.Name == n.while {
				start, end := x.X.Span()
				edits = append(edits, edit{x.For.Byte, start.Byte, "while "})
				// Lines of the condition that buildtools aligned under
				// its opening line move left as much as the header
				// shrinks; those indented from the margin stay.
				shrink := start.Byte - x.For.Byte - len("while ")
				for line := start.Line + 1; line <= end.Line; line++ {
					at := lines[line-1]
					if indent := len(out[at:]) - len(bytes.TrimLeft(out[at:], " ")); indent >= start.LineRune-1 {
						edits = append(edits, edit{at, at + shrink, ""})
					}
				}
			}
		case *build.CallExpr:
			if id, ok := x.X.(*build.Ident); ok && id.Name == n.bytes && len(x.List) == 1 {
				if s, ok := x.List[0].(*build.StringExpr); ok {
					token := "b" + s.Token
					if strings.HasPrefix(s.Token, "r") {
						token = "rb" + s.Token[1:]
					}
					edits = append(edits, edit{id.NamePos.Byte, x.End.Pos.Byte + 1, token})
				}
			}
		}
	})
	return apply(out, edits), nil
}

// doubleQuote gives the string literals that buildtools would re-quote
// itself (those in single quotes) double quotes, keeping their escapes:
// its own quoting writes bytes above 127 as octal escapes, which the
// dialect does not accept in strings.
func doubleQuote(f *build.File) {
	build.Walk(f, func(x build.Expr, _ []build.Expr) {
		s, ok := x.(*build.StringExpr)
		if !ok || strings.HasPrefix(s.Token, "r") || !strings.HasPrefix(s.Token, "'") || strings.ContainsRune(s.Value, '"') {
			return
		}
		q := "'"
		if s.TripleQuote {
			q = "'''"
		}
		dq := strings.Repeat(`"`, len(q))
		token := dq + s.Token[len(q):len(s.Token)-len(q)] + dq
		if v, triple, err := build.Unquote(token); err == nil && v == s.Value && triple == s.TripleQuote {
			s.Token = token
		}
	})
}
