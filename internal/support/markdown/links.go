package markdown

import (
	"html"
	"strings"
)

// A ref is what a link reference definition defines.
type ref struct{ dest, title string }

// label normalises a link's label: case and runs of white space do not
// matter.
func label(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// takeDefinitions takes the link reference definitions at the start of a
// paragraph's text, one a line ([label]: destination "title"), into refs
// (the first of a label wins), and returns the rest.
func takeDefinitions(text string, refs map[string]ref) string {
	for strings.HasPrefix(text, "[") {
		line, rest, _ := strings.Cut(text, "\n")
		end := strings.Index(line, "]:")
		if end < 2 || strings.ContainsAny(line[1:end], "[]") || len(line[1:end]) > 999 {
			break
		}
		lbl := label(line[1:end])
		p := &inlineParser{s: "(" + strings.TrimSpace(line[end+2:]) + ")"}
		dest, title, n, ok := p.linkTail(0)
		if !ok || n != len(p.s) || lbl == "" || strings.TrimSpace(line[end+2:]) == "" {
			break
		}
		if _, dup := refs[lbl]; !dup {
			refs[lbl] = ref{dest, title}
		}
		text = rest
	}
	return text
}

func (p *inlineParser) openBracket(image bool, n int) {
	at := p.add(&Node{Kind: Text, Text: p.s[p.pos : p.pos+n]})
	c := byte('[')
	if image {
		c = '!'
	}
	d := &delimiter{at: at, char: c, active: true, textStart: p.pos + n}
	p.push(d)
	p.brackets = append(p.brackets, d)
	p.pos += n
}

func (p *inlineParser) closeBracket() {
	p.pos++
	if len(p.brackets) == 0 {
		p.text.WriteByte(']')
		return
	}
	opener := p.brackets[len(p.brackets)-1]
	p.brackets = p.brackets[:len(p.brackets)-1]
	if !opener.active {
		p.remove(opener)
		p.text.WriteByte(']')
		return
	}
	dest, title, n, ok := p.linkTail(p.pos)
	if !ok {
		dest, title, n, ok = p.reference(opener.textStart, p.pos-1)
	}
	if !ok {
		p.remove(opener)
		p.text.WriteByte(']')
		return
	}
	p.pos += n
	p.flush()
	// The link's text: the inlines after the opener, emphasis done.
	p.emphasis(opener)
	kind := Link
	if opener.char == '!' {
		kind = Image
	}
	link := &Node{Kind: kind, Dest: dest, Title: title}
	for x := opener.at.next; x != nil; x = x.next {
		link.Children = append(link.Children, x.n)
	}
	opener.at.n = link
	opener.at.next = nil
	p.last = opener.at
	p.remove(opener)
	if kind == Link {
		// No link in a link: earlier openers are spent.
		for _, d := range p.brackets {
			if d.char == '[' {
				d.active = false
			}
		}
	}
}

// reference reads a reference to a definition after a link's text,
// s[start:end]: [label], [] or nothing.
func (p *inlineParser) reference(start, end int) (dest, title string, n int, ok bool) {
	if len(p.refs) == 0 {
		return "", "", 0, false
	}
	name := p.s[start:end]
	if rest := p.s[p.pos:]; strings.HasPrefix(rest, "[") {
		k := strings.IndexAny(rest[1:], "[]") // the label's length
		if k < 0 || rest[1+k] != ']' || k > 999 {
			return "", "", 0, false
		}
		if k > 0 {
			name = rest[1 : 1+k]
		}
		n = k + 2
	}
	r, found := p.refs[label(name)]
	if !found {
		return "", "", 0, false
	}
	return r.dest, r.title, n, true
}

// maxDestination bounds a link's destination, which is read again at each
// ] before it otherwise.
const maxDestination = 4 << 10

// linkTail reads (destination "title") at from, after a link's text: the
// destination and title, unescaped, and how many bytes they take.
func (p *inlineParser) linkTail(from int) (dest, title string, n int, ok bool) {
	s := p.s[from:]
	if !strings.HasPrefix(s, "(") {
		return "", "", 0, false
	}
	i := skipWS(s, 1)
	end := destination(s, i)
	if end < 0 {
		return "", "", 0, false
	}
	if dest = s[i:end]; strings.HasPrefix(dest, "<") {
		dest = dest[1 : len(dest)-1]
	}
	// The title, after white space.
	j := skipWS(s, end)
	if j > end && j < len(s) && (s[j] == '"' || s[j] == '\'' || s[j] == '(') {
		k := p.titleEnd(from, j)
		if k < 0 {
			return "", "", 0, false
		}
		title, j = s[j+1:k], skipWS(s, k+1)
	}
	if j >= len(s) || s[j] != ')' {
		return "", "", 0, false
	}
	return unescape(dest), unescape(title), j + 1, true
}

// destination returns the end of the link destination at s[i:], <…> or
// bare with balanced parentheses, or -1.
func destination(s string, i int) int {
	if i < len(s) && s[i] == '<' {
		j := i + 1
		for j < len(s) && s[j] != '>' && s[j] != '\n' && s[j] != '<' {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			j++
		}
		if j >= len(s) || s[j] != '>' {
			return -1
		}
		return j + 1
	}
	j, depth := i, 0
	for ; j < len(s) && j-i <= maxDestination; j++ {
		c := s[j]
		switch {
		case c == '\\' && j+1 < len(s) && isASCIIPunct(s[j+1]):
			j++
		case c == '(':
			depth++
		case c == ')' && depth == 0, c <= ' ':
			return checkDestination(j, i, depth)
		case c == ')':
			depth--
		}
	}
	return checkDestination(j, i, depth)
}

func checkDestination(end, start, depth int) int {
	if depth != 0 || end-start > maxDestination {
		return -1
	}
	return end
}

// titleEnd returns where the title that opens at s[j] (from p.s[from:])
// closes, or -1.
func (p *inlineParser) titleEnd(from, j int) int {
	s := p.s[from:]
	closer := s[j]
	if closer == '(' {
		closer = ')'
	}
	if p.find(from+j+1, string(closer)) < 0 {
		return -1
	}
	k := j + 1
	for k < len(s) && s[k] != closer {
		if s[k] == '\\' && k+1 < len(s) {
			k++
		}
		k++
	}
	if k >= len(s) {
		return -1
	}
	return k
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
		i++
	}
	return i
}

// unescape resolves backslash escapes and character references.
func unescape(s string) string {
	if !strings.ContainsAny(s, "\\&") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
			b.WriteByte(s[i+1])
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return html.UnescapeString(b.String())
}
