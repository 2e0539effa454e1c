package markdown

import (
	"html"
	"strings"
)

// entity reads a character reference: &amp;, &#65; or &#x41;.
func (p *inlineParser) entity() {
	s := p.s
	if end := strings.IndexByte(s[p.pos:min(len(s), p.pos+34)], ';'); end > 1 {
		ref := s[p.pos : p.pos+end+1]
		if validEntity(ref) {
			if u := html.UnescapeString(ref); u != ref {
				p.text.WriteString(strings.ReplaceAll(u, "\x00", "\uFFFD"))
				p.pos += end + 1
				return
			}
		}
	}
	p.text.WriteByte('&')
	p.pos++
}

// validEntity says whether ref (&...;) has the form of a named or numeric
// character reference.
func validEntity(ref string) bool {
	body := ref[1 : len(ref)-1]
	if strings.HasPrefix(body, "#x") || strings.HasPrefix(body, "#X") {
		return len(body) > 2 && len(body) <= 8 && strings.Trim(body[2:], "0123456789abcdefABCDEF") == ""
	}
	if strings.HasPrefix(body, "#") {
		return len(body) > 1 && len(body) <= 8 && strings.Trim(body[1:], "0123456789") == ""
	}
	for i := 0; i < len(body); i++ {
		if !isAlnum(body[i]) {
			return false
		}
	}
	return body != ""
}

// autolink reads <scheme:address> or <user@host>.
func (p *inlineParser) autolink() bool {
	s := p.s[p.pos+1:]
	// An address holds no space and no <: the search stops at either.
	end := strings.IndexAny(s, "> <\n\t")
	if end <= 0 || s[end] != '>' {
		return false
	}
	addr := s[:end]
	colon := strings.IndexByte(addr, ':')
	switch {
	case colon >= 2 && colon <= 32 && isLetter(addr[0]) && strings.Trim(strings.ToLower(addr[:colon]), "abcdefghijklmnopqrstuvwxyz0123456789+.-") == "":
		p.add(&Node{Kind: AutoLink, Dest: addr})
	case email(addr):
		p.add(&Node{Kind: AutoLink, Dest: addr})
	default:
		return false
	}
	p.pos += end + 2
	return true
}

func email(a string) bool {
	at := strings.IndexByte(a, '@')
	if at < 1 || at == len(a)-1 {
		return false
	}
	return strings.Trim(a[:at], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-") == "" &&
		strings.Trim(a[at+1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == ""
}

// rawHTML reads an inline tag, closing tag or comment.
func (p *inlineParser) rawHTML() bool {
	s := p.s[p.pos:]
	n := 0
	// through is the length of s up to the end of the first end after
	// from, or 0.
	through := func(from int, end string) int {
		if from > len(s) {
			return 0
		}
		if i := p.find(p.pos+from, end); i >= 0 {
			return i - p.pos + len(end)
		}
		return 0
	}
	switch {
	case strings.HasPrefix(s, "<!-->"):
		n = 5
	case strings.HasPrefix(s, "<!--->"):
		n = 6
	case strings.HasPrefix(s, "<!--"):
		n = through(4, "-->")
	case strings.HasPrefix(s, "<?"):
		n = through(2, "?>")
	case strings.HasPrefix(s, "<![CDATA["):
		n = through(9, "]]>")
	case len(s) > 2 && s[1] == '!' && isLetter(s[2]):
		n = through(2, ">")
	case len(s) > 2 && s[1] == '/':
		n = closingTag(s)
	case len(s) > 1 && isLetter(s[1]):
		n = p.openTag(p.pos)
	}
	if n == 0 {
		return false
	}
	p.add(&Node{Kind: RawHTML, Text: s[:n]})
	p.pos += n
	return true
}

// closingTag is the length of the closing tag at the start of s, or 0.
func closingTag(s string) int {
	if len(s) < 3 || !isLetter(s[2]) {
		return 0
	}
	i := 3
	for i < len(s) && (isAlnum(s[i]) || s[i] == '-') {
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
		i++
	}
	if i >= len(s) || s[i] != '>' {
		return 0
	}
	return i + 1
}

// openTag is the length of the open tag at from, or 0.
func (p *inlineParser) openTag(from int) int {
	s := p.s[from:]
	i := 1
	for i < len(s) && (isAlnum(s[i]) || s[i] == '-') {
		i++
	}
	for i < len(s) {
		ws := i
		i = skipWS(s, i)
		switch {
		case i >= len(s):
			return 0
		case s[i] == '>':
			return i + 1
		case strings.HasPrefix(s[i:], "/>"):
			return i + 2
		case i == ws || !(isLetter(s[i]) || s[i] == '_' || s[i] == ':'):
			return 0
		}
		if i = p.attribute(from, i); i < 0 {
			return 0
		}
	}
	return 0
}

// attribute returns the end of the attribute that starts at p.s[from+i:],
// its name and any value, or -1.
func (p *inlineParser) attribute(from, i int) int {
	s := p.s[from:]
	for i < len(s) && (isAlnum(s[i]) || strings.IndexByte("_.:-", s[i]) >= 0) {
		i++
	}
	j := skipWS(s, i)
	if j >= len(s) || s[j] != '=' {
		return i
	}
	j = skipWS(s, j+1)
	if j >= len(s) {
		return -1
	}
	if q := s[j]; q == '"' || q == '\'' {
		end := p.find(from+j+1, string(q))
		if end < 0 {
			return -1
		}
		return end - from + 1
	}
	k := j
	for k < len(s) && strings.IndexByte(" \n\"'=<>`", s[k]) < 0 {
		k++
	}
	if k == j {
		return -1
	}
	return k
}
