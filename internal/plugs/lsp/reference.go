package lsp

import (
	"bufio"
	"bytes"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// An entry is the documentation of one name, as the user documentation
// gives it: the name's longest code form (its signature) and the text.
type entry struct {
	Signature string
	Doc       string
}

// reference maps qualified names (ctx.inputs, host.fs.read_file,
// PauseInfo.reason, schema.string, use …) to their documentation.
type reference map[string]*entry

var (
	codeSpan = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("`([^`]+)`") })
	boldType = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*([A-Z][A-Za-z]+)\*\*`) })
	// qualName is what a code span must start with to name something.
	qualName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*`) })
	listItem = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^- `([^`]+)`: (.*)") })
)

// nameAliases are the short names the documents give values in examples.
var nameAliases = map[string]string{"p": "process"}

// readReference extracts the reference from markdown documents. It knows
// three forms, which the documents keep to:
//   - a heading with code spans (### `ctx.inputs`, ## `use(ref, id = , inputs = )`):
//     each names something, documented by the first paragraph below it;
//   - a table row whose first cell starts with code (| `ctx.state` | per-run state |):
//     a bare name (`read_file(path)`) belongs to the last **Type** of the
//     text above the table, or else to the heading's first name;
//   - a list item "- `ctx.persisted.value`: text".
//
// The first document that documents a name gives its signature and text;
// a heading adds its paragraph to the text of a table row.
func readReference(fsys fs.FS, files ...string) (reference, error) {
	ref := reference{}
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		ref.read(data)
	}
	return ref, nil
}

func (ref reference) read(data []byte) {
	var (
		subject, owner string   // the heading's first name; the **Type** above a table
		heading        []string // the names of the heading
		pending        []string // names of the heading waiting for their paragraph
		para           []string
		header         []string // the cells of the current table's header row
		fence          bool
	)
	flush := func() {
		if len(para) > 0 {
			text := strings.Join(para, "\n")
			for _, n := range pending {
				ref.add(n, "", text)
			}
			pending = nil
		}
		para = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			fence = !fence
		case fence:
			// A call written out below a heading is its signature.
			if len(pending) > 0 && strings.HasPrefix(line, pending[0]+"(") {
				ref.add(pending[0], line, "")
			}
		case strings.HasPrefix(line, "#"):
			flush()
			subject, owner, pending, heading = "", "", nil, nil
			for _, m := range codeSpan().FindAllStringSubmatch(line, -1) {
				name := qualName().FindString(m[1])
				if name == "" {
					continue
				}
				name = strings.TrimSuffix(name, ".")
				if subject == "" {
					subject = name
				}
				ref.add(name, m[1], "")
				pending = append(pending, name)
				heading = append(heading, name)
			}
		case strings.HasPrefix(line, "|"):
			flush()
			pending = nil
			cells := splitRow(line)
			if header == nil {
				header = cells
				continue
			}
			if len(cells) < 2 || !strings.HasPrefix(cells[0], "`") {
				continue // a separator, or a row that is about something else
			}
			doc := cells[1]
			for i := 2; i < len(cells) && i < len(header); i++ {
				doc += "\n\n" + header[i] + ": " + cells[i]
			}
			for _, m := range codeSpan().FindAllStringSubmatch(cells[0], -1) {
				if name := rowName(m[1], owner, subject, heading); name != "" {
					ref.add(name, m[1], doc)
				}
			}
		case strings.TrimSpace(line) == "":
			header = nil
			flush()
		default:
			header = nil
			if m := boldType().FindAllStringSubmatch(line, -1); m != nil {
				owner = m[len(m)-1][1]
			}
			if m := listItem().FindStringSubmatch(line); m != nil {
				if name := rowName(m[1], "", "", nil); strings.Contains(name, ".") {
					ref.add(name, m[1], m[2])
				}
				continue
			}
			para = append(para, line)
		}
	}
	flush()
}

// rowName qualifies the name that code (from a table row) starts with; a
// name of the heading stays as it is.
func rowName(code, owner, subject string, heading []string) string {
	name := strings.TrimSuffix(qualName().FindString(code), ".")
	if name == "" || len(name) < len(code) && !strings.HasPrefix(code[len(name):], "(") {
		return "" // not a name: `$BLAISE_RUN_KIND`, `session/prompt`
	}
	if first, rest, ok := strings.Cut(name, "."); ok {
		if alias, ok := nameAliases[first]; ok {
			return alias + "." + rest
		}
		return name
	}
	switch {
	case slices.Contains(heading, name):
		return name
	case owner != "":
		return owner + "." + name
	case subject != "":
		return subject + "." + name
	}
	return ""
}

// add records doc for name; the longest code form is its signature.
func (ref reference) add(name, code, doc string) {
	doc = withoutLocalLinks(doc)
	e := ref[name]
	if e == nil {
		e = &entry{}
		ref[name] = e
	}
	if len(code) > len(e.Signature) {
		e.Signature = code
	}
	switch {
	case doc == "" || strings.Contains(e.Doc, doc):
	case e.Doc == "":
		e.Doc = doc
	default:
		e.Doc += "\n\n" + doc
	}
}

// withoutLocalLinks keeps the text of the Markdown links of doc whose
// target is a place in the docs ("#ctxagent", "messages.md#fail"), which
// an editor showing a hover cannot open; links to the web stay.
func withoutLocalLinks(doc string) string {
	var b strings.Builder
	for {
		mid := strings.Index(doc, "](")
		if mid < 0 {
			break
		}
		open := linkStart(doc[:mid])
		end := strings.IndexByte(doc[mid:], ')')
		if open < 0 || end < 0 || strings.Contains(doc[mid+2:mid+end], "://") {
			b.WriteString(doc[:mid+2])
			doc = doc[mid+2:]
			continue
		}
		b.WriteString(doc[:open])
		b.WriteString(doc[open+1 : mid])
		doc = doc[mid+end+1:]
	}
	b.WriteString(doc)
	return b.String()
}

// linkStart returns where the text of a link that ends text begins: the
// '[' that the text's brackets balance (`[a[0]` … `]`), or -1.
func linkStart(text string) int {
	depth := 0
	for i := len(text) - 1; i >= 0; i-- {
		switch text[i] {
		case ']':
			depth++
		case '[':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// splitRow returns the trimmed cells of a table row.
func splitRow(line string) []string {
	line = strings.Trim(strings.TrimSpace(line), "|")
	cells := strings.Split(line, " | ")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}
