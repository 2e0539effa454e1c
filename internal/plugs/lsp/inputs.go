package lsp

import (
	"regexp"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.lsp.dev/protocol"
)

// declaredPlug returns the plug a plug file's buffer declares, from the
// text up to the end of its plug(...) call alone, for the schemas of
// ctx.inputs and ctx.persisted.value while the buffer does not load (as
// at the moment a dot is typed); or nil.
func declaredPlug(newLoader func() *interp.Loader, overlay map[string][]byte, path, text string) *interp.Plug {
	loc := plugCall().FindStringIndex(text)
	if loc == nil {
		return nil
	}
	end := closing(text, loc[1]-1)
	if end < 0 {
		return nil
	}
	o := make(map[string][]byte, len(overlay))
	for k, v := range overlay {
		o[k] = v
	}
	o[path] = []byte(text[:end])
	p, _, _ := load(newLoader, o, path, plugFile)
	return p
}

// A bracket is an open bracket of text before a point.
type bracket struct {
	at    int // its offset
	sep   int // of the last comma at its level, or at
	colon int // of the last colon at its level after sep, or -1
}

// brackets scans text up to off and returns the brackets still open
// there, and the offset of the string the point is inside, or -1. It
// returns ok false inside a comment.
func brackets(text string, off int) (open []bracket, inString int, ok bool) {
	inString = -1
	for i := 0; i < off; i++ {
		switch c := text[i]; c {
		case '"', '\'':
			end := stringEnd(text, i)
			if end < 0 || end > off {
				return open, i, true
			}
			i = end - 1
		case '#':
			nl := strings.IndexByte(text[i:], '\n')
			if nl < 0 || i+nl >= off {
				return nil, -1, false
			}
			i += nl
		case '(', '[', '{':
			open = append(open, bracket{at: i, sep: i, colon: -1})
		case ')', ']', '}':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case ',':
			if n := len(open); n > 0 {
				open[n-1].sep, open[n-1].colon = i, -1
			}
		case ':':
			if n := len(open); n > 0 {
				open[n-1].colon = i
			}
		}
	}
	return open, inString, true
}

// stringEnd returns the offset after the string literal at i, or -1 when
// it does not end.
func stringEnd(text string, i int) int {
	q := text[i : i+1]
	if strings.HasPrefix(text[i:], q+q+q) {
		q = q + q + q
	}
	for j := i + len(q); j < len(text); j++ {
		switch {
		case text[j] == '\\':
			j++
		case text[j] == '\n' && len(q) == 1:
			return -1
		case strings.HasPrefix(text[j:], q):
			return j + len(q)
		}
	}
	return -1
}

// closing returns the offset after the bracket that closes the one at
// open, or -1.
func closing(text string, open int) int {
	depth := 0
	for i := open; i < len(text); i++ {
		switch text[i] {
		case '"', '\'':
			end := stringEnd(text, i)
			if end < 0 {
				return -1
			}
			i = end - 1
		case '#':
			nl := strings.IndexByte(text[i:], '\n')
			if nl < 0 {
				return -1
			}
			i += nl
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

var (
	inputsEq = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|[^\w.])inputs\s*=\s*$`) })
	useOpen  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|[^\w.])use\s*$`) })
	keyColon = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`["'](\w+)["']\s*:\s*$`) })
	firstArg = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*"([^"\\]*)"|^\s*'([^'\\]*)'`) })
	keyStart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*(["']?)(\w*)$`) })
)

// inputsAt finds whether off in text is where a key of the inputs of a
// use(REF, inputs = {…}) goes, perhaps in an object nested in them: the
// reference, the keys down to that object, what is typed of the key, and
// whether in quotes.
func inputsAt(text string, off int) (ref string, path []string, partial string, quoted, ok bool) {
	open, inString, ok := brackets(text, off)
	n := len(open)
	if !ok || n == 0 || text[open[n-1].at] != '{' || open[n-1].colon >= 0 {
		return "", nil, "", false, false
	}
	m := keyStart().FindStringSubmatch(text[open[n-1].sep+1 : off])
	if m == nil || inString >= 0 && m[1] == "" {
		return "", nil, "", false, false
	}
	partial, quoted = m[2], m[1] != ""
	for k := n - 1; k >= 1; k-- {
		before := text[:open[k].at]
		if inputsEq().MatchString(before) {
			call := open[k-1]
			a := firstArg().FindStringSubmatch(text[call.at+1:])
			if text[call.at] != '(' || !useOpen().MatchString(text[:call.at]) || a == nil {
				return "", nil, "", false, false
			}
			return a[1] + a[2], path, partial, quoted, true
		}
		key := keyColon().FindStringSubmatch(before)
		if key == nil || text[open[k-1].at] != '{' {
			break
		}
		path = append([]string{key[1]}, path...)
	}
	return "", nil, "", false, false
}

// inputCompletions lists, at off of a configuration d, the names of the
// inputs of the plug a use() names, when off is where a key goes in its
// inputs; ok is false elsewhere.
func (s *server) inputCompletions(d *document, off int) (items []protocol.CompletionItem, ok bool) {
	ref, path, partial, quoted, ok := inputsAt(d.text, off)
	if !ok {
		return nil, false
	}
	items = []protocol.CompletionItem{}
	p := s.plugOf(d, ref)
	if p == nil || p.Inputs == nil {
		return items, true
	}
	sc := p.Inputs
	for _, k := range path {
		if sc = field(sc, k); sc == nil {
			return items, true
		}
	}
	if sc.Kind() == interp.KindOptional {
		sc = sc.Elem()
	}
	if sc.Kind() != interp.KindObject {
		return items, true
	}
	for name, f := range sc.Fields() {
		if !strings.HasPrefix(name, partial) {
			continue
		}
		it := protocol.CompletionItem{Label: name, Kind: protocol.CompletionItemKindField, Detail: name + ": " + f.Describe()}
		if doc := f.Doc(); doc != "" {
			it.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: doc}
		}
		if !quoted {
			it.InsertText = `"` + name + `": `
		}
		items = append(items, it)
	}
	return items, true
}
