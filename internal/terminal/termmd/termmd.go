// Package termmd renders Markdown for a terminal: headings, emphasis, lists,
// quotes, code and tables, wrapped to a width, styled with SGR sequences
// or not at all. It parses with goldmark's CommonMark parser, and finds GFM
// tables itself: goldmark's extension package compiles regular expressions
// at init that every process of the binary, which links this package,
// would pay for at start.
package termmd

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// A Style gives the SGR parameters of each kind of text ("1;38;5;75": bold,
// colour 75); the zero Style writes no sequence at all.
type Style struct {
	Heading, Code, Link, URL, Quote, Rule, TableRule string
}

// The styles, for terminals with dark and light backgrounds.
var (
	Dark  = Style{Heading: "1;38;5;75", Code: "38;5;180", Link: "4;38;5;81", URL: "2", Quote: "38;5;245", Rule: "38;5;240", TableRule: "38;5;240"}
	Light = Style{Heading: "1;38;5;25", Code: "38;5;94", Link: "4;38;5;31", URL: "2", Quote: "38;5;242", Rule: "38;5;248", TableRule: "38;5;248"}
	Plain = Style{}
)

// A Renderer renders Markdown text to lines at most Width columns wide
// (except code blocks, tables and words too long for it, which are kept
// whole), ending each line with a newline.
type Renderer struct {
	Width int
	Style Style
	md    goldmark.Markdown
}

// New returns a renderer wrapping at width columns (at least 20).
func New(width int, style Style) *Renderer {
	return &Renderer{
		Width: max(width, 20),
		Style: style,
		md:    goldmark.New(),
	}
}

// Render renders src; blocks are separated by a blank line.
func (r *Renderer) Render(src string) string {
	var out []string
	for _, p := range splitTables(src) {
		var lines []string
		if p.table != nil {
			lines = r.table(p.table)
		} else {
			lines = r.markdown(p.text)
		}
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, lines...)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func (r *Renderer) markdown(src string) []string {
	source := []byte(src)
	w := &writer{r: r, src: source}
	return w.blocks(r.md.Parser().Parse(text.NewReader(source)), r.Width, false)
}

// cell renders the inline Markdown of a table's cell.
func (r *Renderer) cell(src string) string {
	source := []byte(src)
	w := &writer{r: r, src: source}
	doc := r.md.Parser().Parse(text.NewReader(source))
	if p := doc.FirstChild(); p != nil {
		return strings.TrimSpace(w.inline(p))
	}
	return ""
}

type writer struct {
	r   *Renderer
	src []byte
}

// paint wraps s in the style sgr, unless the style is empty.
func paint(sgr, s string) string {
	if sgr == "" || s == "" {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[0m"
}

// on and off wrap s in a style that nests: its own end sequence, not a reset.
func (w *writer) on(set, unset, s string) string {
	if w.r.Style == (Style{}) {
		return s
	}
	return "\x1b[" + set + "m" + s + "\x1b[" + unset + "m"
}

// blocks renders the children of a container, each a run of lines,
// separated by a blank line unless tight (the items of a tight list).
func (w *writer) blocks(n ast.Node, width int, tight bool) []string {
	var out []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		lines := w.block(c, width)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, "")
		}
		out = append(out, lines...)
	}
	return out
}

func (w *writer) block(n ast.Node, width int) []string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return wrap(w.inline(n), width)
	case *ast.Heading:
		return wrap(paint(w.r.Style.Heading, w.inline(n)), width)
	case *ast.ThematicBreak:
		return []string{paint(w.r.Style.Rule, strings.Repeat("─", min(width, 40)))}
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		return w.code(n)
	case *ast.HTMLBlock:
		return w.rawLines(n)
	case *ast.Blockquote:
		return prefixed(w.blocks(n, width-2, false), paint(w.r.Style.Quote, "│ "), paint(w.r.Style.Quote, "│ "))
	case *ast.List:
		return w.list(n, width)
	}
	return w.blocks(n, width, false)
}

// list renders the items with their markers, the lines after an item's
// first one indented under its text.
func (w *writer) list(l *ast.List, width int) []string {
	var out []string
	number := l.Start
	widest := 2
	if l.IsOrdered() {
		widest = len(strconv.Itoa(l.Start+l.ChildCount()-1)) + 2
	}
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		marker := "• "
		if l.IsOrdered() {
			marker = strconv.Itoa(number) + string(l.Marker) + " "
			number++
		}
		marker += strings.Repeat(" ", max(widest-len(marker), 0))
		lines := w.blocks(item, width-widest, l.IsTight)
		if len(lines) == 0 {
			lines = []string{""}
		}
		if len(out) > 0 && !l.IsTight {
			out = append(out, "")
		}
		out = append(out, prefixed(lines, marker, strings.Repeat(" ", widest))...)
	}
	return out
}

// code renders a code block's lines as they are, indented and not wrapped.
func (w *writer) code(n ast.Node) []string {
	var out []string
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		l := strings.TrimRight(string(seg.Value(w.src)), "\r\n")
		l = strings.ReplaceAll(l, "\t", "    ")
		if strings.TrimSpace(l) == "" {
			out = append(out, "")
			continue
		}
		out = append(out, "  "+paint(w.r.Style.Code, l))
	}
	return out
}

func (w *writer) rawLines(n ast.Node) []string {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(w.src))
	}
	if h, ok := n.(*ast.HTMLBlock); ok && h.HasClosure() {
		b.Write(h.ClosureLine.Value(w.src))
	}
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

// inline renders the inline content of n: soft line breaks as spaces, hard
// ones as newlines.
func (w *writer) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inlineNode(&b, c)
	}
	return b.String()
}

func (w *writer) inlineNode(b *strings.Builder, n ast.Node) {
	st := w.r.Style
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(w.src)
		if !n.IsRaw() {
			v = util.ResolveNumericReferences(util.ResolveEntityNames(util.UnescapePunctuations(v)))
		}
		b.Write(v)
		switch {
		case n.HardLineBreak():
			b.WriteByte('\n')
		case n.SoftLineBreak():
			b.WriteByte(' ')
		}
	case *ast.String:
		b.Write(n.Value)
	case *ast.CodeSpan:
		var code strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				code.Write(t.Segment.Value(w.src))
			} else if s, ok := c.(*ast.String); ok {
				code.Write(s.Value)
			}
		}
		b.WriteString(paint(st.Code, code.String()))
	case *ast.Emphasis:
		if n.Level >= 2 {
			b.WriteString(w.on("1", "22", w.inline(n)))
		} else {
			b.WriteString(w.on("3", "23", w.inline(n)))
		}
	case *ast.Link:
		label := w.inline(n)
		b.WriteString(paint(st.Link, label))
		if dest := string(n.Destination); dest != "" && dest != ansi.Strip(label) {
			b.WriteString(" " + paint(st.URL, "("+dest+")"))
		}
	case *ast.AutoLink:
		b.WriteString(paint(st.Link, string(n.URL(w.src))))
	case *ast.Image:
		b.WriteString(w.inline(n) + " " + paint(st.URL, "(image: "+string(n.Destination)+")"))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.Write(seg.Value(w.src))
		}
	default:
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			w.inlineNode(b, c)
		}
	}
}

// wrap breaks s into lines of at most width columns, at spaces where it
// can; its own newlines are kept.
func wrap(s string, width int) []string {
	s = strings.TrimRight(s, " \n")
	if s == "" {
		return nil
	}
	lines := strings.Split(ansi.Wordwrap(s, max(width, 10), ""), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// prefixed puts first before the first line and rest before the others
// (nothing before an empty line but what it needs to stay in its quote).
func prefixed(lines []string, first, rest string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		p := rest
		if i == 0 {
			p = first
		}
		if l == "" {
			p = strings.TrimRight(p, " ")
		}
		out[i] = p + l
	}
	return out
}
