// Package termmd renders Markdown for a terminal: headings, emphasis, lists,
// quotes, code and tables, wrapped to a width, styled with SGR sequences
// or not at all. It parses with package markdown, and finds GFM tables
// itself.
package termmd

import (
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/support/markdown"
	"github.com/charmbracelet/x/ansi"
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
}

// New returns a renderer wrapping at width columns (at least 20).
func New(width int, style Style) *Renderer {
	return &Renderer{Width: max(width, 20), Style: style}
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
	w := &writer{r: r}
	return w.blocks(markdown.Parse(src).Children, r.Width, false)
}

// cell renders the inline Markdown of a table's cell.
func (r *Renderer) cell(src string) string {
	w := &writer{r: r}
	return strings.TrimSpace(w.inline(markdown.ParseInline(src)))
}

type writer struct {
	r *Renderer
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

// blocks renders the blocks of a container, each a run of lines,
// separated by a blank line unless tight (the items of a tight list).
func (w *writer) blocks(nodes []*markdown.Node, width int, tight bool) []string {
	var out []string
	for _, c := range nodes {
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

func (w *writer) block(n *markdown.Node, width int) []string {
	switch n.Kind {
	case markdown.Paragraph:
		return wrap(w.inline(n.Children), width)
	case markdown.Heading:
		return wrap(paint(w.r.Style.Heading, w.inline(n.Children)), width)
	case markdown.ThematicBreak:
		return []string{paint(w.r.Style.Rule, strings.Repeat("─", min(width, 40)))}
	case markdown.CodeBlock:
		return w.code(n.Text)
	case markdown.HTMLBlock:
		return strings.Split(strings.TrimRight(n.Text, "\n"), "\n")
	case markdown.Blockquote:
		return prefixed(w.blocks(n.Children, width-2, false), paint(w.r.Style.Quote, "│ "), paint(w.r.Style.Quote, "│ "))
	case markdown.List:
		return w.list(n, width)
	}
	return w.blocks(n.Children, width, false)
}

// list renders the items with their markers, the lines after an item's
// first one indented under its text.
func (w *writer) list(l *markdown.Node, width int) []string {
	var out []string
	number := l.Start
	widest := 2
	if l.Ordered {
		widest = len(strconv.Itoa(l.Start+len(l.Children)-1)) + 2
	}
	for _, item := range l.Children {
		marker := "• "
		if l.Ordered {
			marker = strconv.Itoa(number) + string(l.Marker) + " "
			number++
		}
		marker += strings.Repeat(" ", max(widest-len(marker), 0))
		lines := w.blocks(item.Children, width-widest, l.Tight)
		if len(lines) == 0 {
			lines = []string{""}
		}
		if len(out) > 0 && !l.Tight {
			out = append(out, "")
		}
		out = append(out, prefixed(lines, marker, strings.Repeat(" ", widest))...)
	}
	return out
}

// code renders a code block's lines as they are, indented and not wrapped.
func (w *writer) code(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, "\r\n")
		l = strings.ReplaceAll(l, "\t", "    ")
		if strings.TrimSpace(l) == "" {
			out = append(out, "")
			continue
		}
		out = append(out, "  "+paint(w.r.Style.Code, l))
	}
	return out
}

// inline renders inlines: soft line breaks as spaces, hard ones as
// newlines.
func (w *writer) inline(nodes []*markdown.Node) string {
	var b strings.Builder
	for _, n := range nodes {
		w.inlineNode(&b, n)
	}
	return b.String()
}

func (w *writer) inlineNode(b *strings.Builder, n *markdown.Node) {
	st := w.r.Style
	switch n.Kind {
	case markdown.Text, markdown.RawHTML:
		b.WriteString(n.Text)
	case markdown.SoftBreak:
		b.WriteByte(' ')
	case markdown.HardBreak:
		b.WriteByte('\n')
	case markdown.Code:
		b.WriteString(paint(st.Code, n.Text))
	case markdown.Emphasis:
		if n.Level >= 2 {
			b.WriteString(w.on("1", "22", w.inline(n.Children)))
		} else {
			b.WriteString(w.on("3", "23", w.inline(n.Children)))
		}
	case markdown.Link:
		label := w.inline(n.Children)
		b.WriteString(paint(st.Link, label))
		if n.Dest != "" && n.Dest != ansi.Strip(label) {
			b.WriteString(" " + paint(st.URL, "("+n.Dest+")"))
		}
	case markdown.AutoLink:
		b.WriteString(paint(st.Link, n.Dest))
	case markdown.Image:
		b.WriteString(w.inline(n.Children) + " " + paint(st.URL, "(image: "+n.Dest+")"))
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
