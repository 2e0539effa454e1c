package starfmt

import (
	"strings"

	"go.starlark.net/syntax"

	"github.com/blaiseagent/blaise-agent/interp"
)

// ReplaceString rewrites, in src of the file at path, each string literal
// whose value is old into one whose value is new, in place: its quotes
// kept, and every other byte of the file (layout, comments) as it was. It
// returns the new source and how many literals it changed.
func ReplaceString(path string, src []byte, old, new string) ([]byte, int, error) {
	f, err := interp.FileOptions.Parse(path, src, 0)
	if err != nil {
		return nil, 0, interp.WithHint(err, path, src)
	}
	o := newOffsets(src)
	var edits []edit
	syntax.Walk(f, func(n syntax.Node) bool {
		if lit, ok := n.(*syntax.Literal); ok && lit.Token == syntax.STRING && lit.Value == old {
			start, end := lit.Span()
			edits = append(edits, edit{o.of(start), o.of(end), quoteLike(string(src[o.of(start):o.of(end)]), new)})
		}
		return true
	})
	return apply(src, edits), len(edits), nil
}

// quoteLike quotes s with the quotes of the literal raw, when s needs no
// escape in them; else as Starlark quotes it.
func quoteLike(raw, s string) string {
	body := strings.TrimPrefix(raw, "r")
	q := body[:1]
	if strings.HasPrefix(body, q+q+q) {
		q += q + q
	}
	if strings.ContainsAny(s, "\\\n\r'\"") {
		return syntax.Quote(s, false)
	}
	return raw[:len(raw)-len(body)] + q + s + q
}
