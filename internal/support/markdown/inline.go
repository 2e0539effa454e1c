package markdown

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// An inline being parsed: a node in a list, which links and emphasis
// regroup as they close (CommonMark's delimiter algorithm).
type inl struct {
	n          *Node
	prev, next *inl
}

// A delimiter is a run of * or _ (emphasis), or an opening [ or ![.
type delimiter struct {
	at          *inl
	char        byte // '*', '_', '[' or '!'
	count, orig int
	open, close bool
	active      bool // a bracket that may still open a link
	textStart   int  // where a bracket's text starts in the source
	prev, next  *delimiter
}

type inlineParser struct {
	s           string
	pos         int
	first, last *inl
	text        strings.Builder
	delims      *delimiter   // the last one
	brackets    []*delimiter // the open [ and ![, innermost last
	refs        map[string]ref
	// absent holds, for a string searched for, where a search for it
	// failed: one from there on fails too. It keeps the parse linear in
	// the length of the text, whatever the text (an agent's message may
	// be made to be slow).
	absent map[string]int
}

// find returns the position of needle in s at or after from, or -1.
func (p *inlineParser) find(from int, needle string) int {
	if at, ok := p.absent[needle]; ok && from >= at {
		return -1
	}
	if i := strings.Index(p.s[from:], needle); i >= 0 {
		return from + i
	}
	if p.absent == nil {
		p.absent = map[string]int{}
	}
	p.absent[needle] = from
	return -1
}

func parseInlines(s string, refs map[string]ref) []*Node {
	p := &inlineParser{s: s, refs: refs}
	p.run()
	var out []*Node
	for x := p.first; x != nil; x = x.next {
		out = append(out, x.n)
	}
	return merge(out)
}

// merge joins adjacent texts.
func merge(nodes []*Node) []*Node {
	var out []*Node
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if n.Kind == Text {
			var b strings.Builder
			for ; i < len(nodes) && nodes[i].Kind == Text; i++ {
				b.WriteString(nodes[i].Text)
			}
			i--
			if b.Len() > 0 {
				out = append(out, &Node{Kind: Text, Text: b.String()})
			}
			continue
		}
		if n.Kind == Emphasis || n.Kind == Link || n.Kind == Image {
			n.Children = merge(n.Children)
		}
		out = append(out, n)
	}
	return out
}

func (p *inlineParser) add(n *Node) *inl {
	p.flush()
	x := &inl{n: n, prev: p.last}
	if p.last != nil {
		p.last.next = x
	} else {
		p.first = x
	}
	p.last = x
	return x
}

func (p *inlineParser) flush() {
	if p.text.Len() == 0 {
		return
	}
	t := p.text.String()
	p.text.Reset()
	p.add(&Node{Kind: Text, Text: t})
}

func (p *inlineParser) run() {
	s := p.s
	for p.pos < len(s) {
		c := s[p.pos]
		switch c {
		case '\\':
			p.backslash()
		case '`':
			p.codeSpan()
		case '&':
			p.entity()
		case '<':
			if !p.autolink() && !p.rawHTML() {
				p.text.WriteByte('<')
				p.pos++
			}
		case '\n':
			p.lineBreak()
		case '*', '_':
			p.emphasisRun()
		case '[':
			p.openBracket(false, 1)
		case '!':
			if p.pos+1 < len(s) && s[p.pos+1] == '[' {
				p.openBracket(true, 2)
			} else {
				p.text.WriteByte('!')
				p.pos++
			}
		case ']':
			p.closeBracket()
		default:
			p.text.WriteByte(c)
			p.pos++
		}
	}
	p.flush()
	p.emphasis(nil)
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

func (p *inlineParser) backslash() {
	s := p.s
	switch {
	case p.pos+1 < len(s) && s[p.pos+1] == '\n':
		p.add(&Node{Kind: HardBreak})
		p.pos += 2
		p.skipSpaces()
	case p.pos+1 < len(s) && isASCIIPunct(s[p.pos+1]):
		p.text.WriteByte(s[p.pos+1])
		p.pos += 2
	default:
		p.text.WriteByte('\\')
		p.pos++
	}
}

func (p *inlineParser) skipSpaces() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func runLength(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

func (p *inlineParser) codeSpan() {
	s := p.s
	n := runLength(s, p.pos, '`')
	run := s[p.pos : p.pos+n]
	for i := p.pos + n; i < len(s); {
		j := p.find(i, run)
		if j < 0 {
			break
		}
		if m := runLength(s, j, '`'); m == n {
			code := strings.ReplaceAll(s[p.pos+n:j], "\n", " ")
			if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
				code = code[1 : len(code)-1]
			}
			p.add(&Node{Kind: Code, Text: code})
			p.pos = j + n
			return
		} else {
			i = j + m
		}
	}
	p.text.WriteString(s[p.pos : p.pos+n])
	p.pos += n
}

func (p *inlineParser) lineBreak() {
	t := p.text.String()
	trimmed := strings.TrimRight(t, " ")
	p.text.Reset()
	p.text.WriteString(trimmed)
	if len(t)-len(trimmed) >= 2 {
		p.add(&Node{Kind: HardBreak})
	} else {
		p.add(&Node{Kind: SoftBreak})
	}
	p.pos++
	p.skipSpaces()
}

// runeBefore and runeAfter are the characters around s[i:j]; a line's
// start and end count as spaces.
func runeBefore(s string, i int) rune {
	if i == 0 {
		return ' '
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return r
}

func runeAfter(s string, j int) rune {
	if j >= len(s) {
		return ' '
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	return r
}

func isPunct(r rune) bool {
	return r < utf8.RuneSelf && isASCIIPunct(byte(r)) || unicode.IsPunct(r) || unicode.IsSymbol(r)
}

func (p *inlineParser) emphasisRun() {
	s, c := p.s, p.s[p.pos]
	n := runLength(s, p.pos, c)
	before, after := runeBefore(s, p.pos), runeAfter(s, p.pos+n)
	left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
	right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
	open, close := left, right
	if c == '_' {
		open = left && (!right || isPunct(before))
		close = right && (!left || isPunct(after))
	}
	at := p.add(&Node{Kind: Text, Text: s[p.pos : p.pos+n]})
	p.push(&delimiter{at: at, char: c, count: n, orig: n, open: open, close: close})
	p.pos += n
}

func (p *inlineParser) push(d *delimiter) {
	d.prev = p.delims
	if p.delims != nil {
		p.delims.next = d
	}
	p.delims = d
}

func (p *inlineParser) remove(d *delimiter) {
	if d.prev != nil {
		d.prev.next = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else {
		p.delims = d.prev
	}
}

func (p *inlineParser) unlink(x *inl) {
	if x.prev != nil {
		x.prev.next = x.next
	} else {
		p.first = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	} else {
		p.last = x.prev
	}
}

// emphasis matches the emphasis delimiters above bottom (nil: all), then
// drops them (CommonMark's "process emphasis").
func (p *inlineParser) emphasis(bottom *delimiter) {
	var first *delimiter
	for d := p.delims; d != nil && d != bottom; d = d.prev {
		first = d
	}
	if first == nil {
		return
	}
	// Openers below these were looked at already, by char, closer's
	// length mod 3 and whether it can open.
	openersBottom := map[[3]int]*delimiter{}
	for closer := first; closer != nil; {
		if closer.char != '*' && closer.char != '_' || !closer.close {
			closer = closer.next
			continue
		}
		key := [3]int{int(closer.char), closer.orig % 3, b2i(closer.open)}
		var opener *delimiter
		for o := closer.prev; o != nil && o != bottom && o != openersBottom[key]; o = o.prev {
			if o.char == closer.char && o.open {
				if (o.close || closer.open) && (o.orig+closer.orig)%3 == 0 && (o.orig%3 != 0 || closer.orig%3 != 0) {
					continue
				}
				opener = o
				break
			}
		}
		if opener == nil {
			openersBottom[key] = closer.prev
			next := closer.next
			if !closer.open {
				p.remove(closer)
			}
			closer = next
			continue
		}
		use := 1
		if opener.count >= 2 && closer.count >= 2 {
			use = 2
		}
		opener.count -= use
		closer.count -= use
		opener.at.n.Text = opener.at.n.Text[:opener.count]
		closer.at.n.Text = closer.at.n.Text[:closer.count]
		em := &Node{Kind: Emphasis, Level: use}
		for x := opener.at.next; x != closer.at; x = x.next {
			em.Children = append(em.Children, x.n)
		}
		x := &inl{n: em, prev: opener.at, next: closer.at}
		opener.at.next, closer.at.prev = x, x
		// The delimiters between them are spent.
		for d := closer.prev; d != opener; {
			prev := d.prev
			p.remove(d)
			d = prev
		}
		if opener.count == 0 {
			p.unlink(opener.at)
			p.remove(opener)
		}
		if closer.count == 0 {
			next := closer.next
			p.unlink(closer.at)
			p.remove(closer)
			closer = next
		}
	}
	p.dropDelims(bottom)
}

// dropDelims removes the delimiters above bottom.
func (p *inlineParser) dropDelims(bottom *delimiter) {
	for p.delims != nil && p.delims != bottom {
		p.remove(p.delims)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
