package markdown

import (
	"strconv"
	"strings"
)

// HTML renders src as inert HTML: its text escaped, raw HTML omitted, and
// links and images whose address could run code (javascript: and the like)
// without it.
func HTML(src string) string {
	var b strings.Builder
	for _, n := range Parse(src).Children {
		block(&b, n, false)
	}
	return b.String()
}

func block(b *strings.Builder, n *Node, tight bool) {
	switch n.Kind {
	case Paragraph:
		if tight {
			inlines(b, n.Children)
			return
		}
		b.WriteString("<p>")
		inlines(b, n.Children)
		b.WriteString("</p>\n")
	case Heading:
		h := strconv.Itoa(n.Level)
		b.WriteString("<h" + h + ">")
		inlines(b, n.Children)
		b.WriteString("</h" + h + ">\n")
	case ThematicBreak:
		b.WriteString("<hr>\n")
	case CodeBlock:
		b.WriteString("<pre><code")
		if n.Info != "" {
			b.WriteString(` class="language-`)
			escape(b, n.Info)
			b.WriteString(`"`)
		}
		b.WriteString(">")
		escape(b, n.Text)
		b.WriteString("</code></pre>\n")
	case HTMLBlock:
		b.WriteString("<!-- raw HTML omitted -->\n")
	case Blockquote:
		b.WriteString("<blockquote>\n")
		for _, c := range n.Children {
			block(b, c, false)
		}
		b.WriteString("</blockquote>\n")
	case List:
		tag := "ul"
		if n.Ordered {
			tag = "ol"
		}
		b.WriteString("<" + tag)
		if n.Ordered && n.Start != 1 {
			b.WriteString(` start="` + strconv.Itoa(n.Start) + `"`)
		}
		b.WriteString(">\n")
		for _, it := range n.Children {
			listItemHTML(b, it, n.Tight)
		}
		b.WriteString("</" + tag + ">\n")
	}
}

func listItemHTML(b *strings.Builder, it *Node, tight bool) {
	b.WriteString("<li>")
	for _, c := range it.Children {
		// A tight list's paragraphs are their text alone; any other block
		// starts on a line of its own.
		if !tight || c.Kind != Paragraph {
			if s := b.String(); s[len(s)-1] != '\n' {
				b.WriteByte('\n')
			}
		}
		block(b, c, tight)
	}
	b.WriteString("</li>\n")
}

func inlines(b *strings.Builder, nodes []*Node) {
	for _, n := range nodes {
		switch n.Kind {
		case Text:
			escape(b, n.Text)
		case SoftBreak:
			b.WriteString("\n")
		case HardBreak:
			b.WriteString("<br>\n")
		case Code:
			b.WriteString("<code>")
			escape(b, n.Text)
			b.WriteString("</code>")
		case Emphasis:
			tag := "em"
			if n.Level == 2 {
				tag = "strong"
			}
			b.WriteString("<" + tag + ">")
			inlines(b, n.Children)
			b.WriteString("</" + tag + ">")
		case Link:
			b.WriteString(`<a href="`)
			url(b, n.Dest)
			b.WriteString(`"`)
			title(b, n.Title)
			b.WriteString(">")
			inlines(b, n.Children)
			b.WriteString("</a>")
		case Image:
			b.WriteString(`<img src="`)
			url(b, n.Dest)
			b.WriteString(`" alt="`)
			escape(b, plain(n.Children))
			b.WriteString(`"`)
			title(b, n.Title)
			b.WriteString(">")
		case AutoLink:
			dest := n.Dest
			if !strings.Contains(dest, ":") {
				dest = "mailto:" + dest
			}
			b.WriteString(`<a href="`)
			url(b, dest)
			b.WriteString(`">`)
			escape(b, n.Dest)
			b.WriteString("</a>")
		case RawHTML:
			b.WriteString("<!-- raw HTML omitted -->")
		}
	}
}

func title(b *strings.Builder, t string) {
	if t != "" {
		b.WriteString(` title="`)
		escape(b, t)
		b.WriteString(`"`)
	}
}

// plain is the text of inlines without their markup (an image's alt).
func plain(nodes []*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		switch n.Kind {
		case Text, Code:
			b.WriteString(n.Text)
		case SoftBreak, HardBreak:
			b.WriteByte('\n')
		case AutoLink:
			b.WriteString(n.Dest)
		default:
			b.WriteString(plain(n.Children))
		}
	}
	return b.String()
}

func escape(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteByte(c)
		}
	}
}

// url writes an address for an attribute: percent-encoded where a URL
// needs it, escaped for HTML, and empty when it could run code.
func url(b *strings.Builder, u string) {
	if dangerous(u) {
		return
	}
	const hex = "0123456789ABCDEF"
	var e strings.Builder
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case c == '%' && i+2 < len(u) && isHex(u[i+1]) && isHex(u[i+2]):
			e.WriteByte(c)
		case c <= ' ' || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' || c == '%' || c == '[' || c == ']':
			e.WriteByte('%')
			e.WriteByte(hex[c>>4])
			e.WriteByte(hex[c&15])
		default:
			e.WriteByte(c)
		}
	}
	escape(b, e.String())
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

// dangerous says whether a link to u could run code in the page: the
// schemes javascript:, vbscript: and file:, and data: but for images.
func dangerous(u string) bool {
	// Browsers skip the control characters and spaces before an address,
	// and tabs and line breaks inside its scheme.
	l := strings.ToLower(strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, strings.TrimLeftFunc(u, func(r rune) bool { return r <= ' ' })))
	switch {
	case strings.HasPrefix(l, "javascript:"), strings.HasPrefix(l, "vbscript:"), strings.HasPrefix(l, "file:"):
		return true
	case strings.HasPrefix(l, "data:"):
		for _, ok := range []string{"data:image/png", "data:image/gif", "data:image/jpeg", "data:image/webp"} {
			if strings.HasPrefix(l, ok) {
				return false
			}
		}
		return true
	}
	return false
}
