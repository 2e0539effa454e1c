// Package markdown parses the Markdown that agents write (CommonMark's
// blocks and inlines; a link reference definition on one line; no GFM
// tables, which the terminal finds itself) into a tree, and renders it as
// inert HTML. It does no work before its first use: a library that
// compiles patterns or builds tables at init costs every process of the
// binary at start, whether it renders Markdown or not
// (docs/performance.md). Its time grows with the length of its text
// whatever the text: an agent's message may be made to be slow.
package markdown

import "strings"

// Kind is the kind of a Node.
type Kind uint8

// The kinds of blocks, then of inlines.
const (
	Document Kind = iota
	Paragraph
	Heading       // Level 1 to 6
	ThematicBreak // a rule
	CodeBlock     // Text, its lines; Info, a fence's info string
	HTMLBlock     // Text, its lines as written
	Blockquote
	List // Ordered, Start, Marker, Tight; its children are Items
	Item

	Text      // Text
	SoftBreak // a line break inside a paragraph
	HardBreak
	Code     // Text, a code span's content
	Emphasis // Level 1 (emphasis) or 2 (strong)
	Link     // Dest, Title; its children are its text
	Image    // Dest, Title; its children are its description
	AutoLink // Dest, the address as written
	RawHTML  // Text, an inline tag as written
)

// A Node is a block or an inline of a document.
type Node struct {
	Kind     Kind
	Children []*Node
	Text     string
	Level    int
	Info     string
	Dest     string
	Title    string
	Ordered  bool
	Start    int
	Marker   byte // a list's: -, + or *, or . or ) after a number
	Tight    bool
}

// Parse parses src, a Markdown document.
func Parse(src string) *Node {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\x00", "\uFFFD")
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	doc := &Node{Kind: Document, Children: parseBlocks(lines, 0)}
	// Links may refer to definitions anywhere in the document: the
	// inlines are parsed once all are known.
	refs := map[string]ref{}
	definitions(doc, refs)
	parseAllInlines(doc, refs)
	return doc
}

// ParseInline parses src as the content of a paragraph.
func ParseInline(src string) []*Node {
	return parseInlines(strings.TrimSpace(src), nil)
}

// definitions takes the link reference definitions out of the paragraphs
// under n into refs, and the paragraphs left empty out of n.
func definitions(n *Node, refs map[string]ref) {
	kept := n.Children[:0]
	for _, c := range n.Children {
		if c.Kind == Paragraph {
			c.Text = takeDefinitions(c.Text, refs)
			if c.Text == "" {
				continue
			}
		}
		definitions(c, refs)
		kept = append(kept, c)
	}
	n.Children = kept
}

// parseAllInlines parses the text of the paragraphs and headings under n.
func parseAllInlines(n *Node, refs map[string]ref) {
	if n.Kind == Paragraph || n.Kind == Heading {
		n.Children, n.Text = parseInlines(n.Text, refs), ""
		return
	}
	for _, c := range n.Children {
		parseAllInlines(c, refs)
	}
}

func blank(l string) bool { return strings.TrimLeft(l, " \t") == "" }

// indent is how many columns the white space at the start of l takes, a
// tab reaching the next multiple of four.
func indent(l string) int {
	col := 0
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case ' ':
			col++
		case '\t':
			col += 4 - col%4
		default:
			return col
		}
	}
	return col
}

// rest is l after the white space at its start.
func rest(l string) string { return strings.TrimLeft(l, " \t") }

// strip takes n columns of white space off the start of l; the columns
// left of a tab it cuts become spaces, and a tab it does not reach stays.
func strip(l string, n int) string {
	col := 0
	for i := 0; i < len(l); i++ {
		if col >= n {
			return l[i:]
		}
		switch l[i] {
		case ' ':
			col++
		case '\t':
			w := 4 - col%4
			if col+w > n {
				return strings.Repeat(" ", col+w-n) + l[i+1:]
			}
			col += w
		default:
			return l[i:]
		}
	}
	return ""
}

// maxDepth bounds the nesting of quotes and lists: deeper, their markers
// are text. Each level reads its lines once more.
const maxDepth = 64

// parseBlocks parses the lines of a container, its markers taken off, at
// depth containers deep.
func parseBlocks(lines []string, depth int) []*Node {
	blocks, _ := blocksOf(lines, depth)
	return blocks
}

// blocksOf parses lines into blocks, and says whether a blank line
// separates two of them.
func blocksOf(lines []string, depth int) (out []*Node, apart bool) {
	for i := 0; i < len(lines); {
		l := lines[i]
		if blank(l) {
			i++
			continue
		}
		ind := indent(l)
		s := rest(l)
		var n *Node
		var used int
		switch {
		case ind >= 4:
			n, used = indentedCode(lines[i:])
		case fence(s) != "":
			n, used = fencedCode(lines[i:], ind, fence(s))
		case atxLevel(s) > 0:
			n, used = &Node{Kind: Heading, Level: atxLevel(s), Text: atxText(s)}, 1
		case thematicBreak(s):
			n, used = &Node{Kind: ThematicBreak}, 1
		case s[0] == '>' && depth < maxDepth:
			n, used = blockquote(lines[i:], depth+1)
		case listMarker(s).width > 0 && depth < maxDepth:
			n, used = list(lines[i:], depth+1)
		case htmlStart(s) != htmlNone:
			n, used = htmlBlock(lines[i:], htmlStart(s))
		default:
			n, used = paragraph(lines[i:])
		}
		if len(out) > 0 && i > 0 && blank(lines[i-1]) {
			apart = true
		}
		out = append(out, n)
		i += used
	}
	return out, apart
}

func indentedCode(lines []string) (*Node, int) {
	end, last := 0, 0
	for end < len(lines) && (blank(lines[end]) || indent(lines[end]) >= 4) {
		if !blank(lines[end]) {
			last = end + 1
		}
		end++
	}
	var b strings.Builder
	for _, l := range lines[:last] {
		b.WriteString(strip(l, 4))
		b.WriteByte('\n')
	}
	return &Node{Kind: CodeBlock, Text: b.String()}, last
}

// fence returns the fence that opens a code block at the start of s: three
// or more backticks or tildes, or "".
func fence(s string) string {
	if len(s) < 3 || s[0] != '`' && s[0] != '~' {
		return ""
	}
	n := len(s) - len(strings.TrimLeft(s, s[:1]))
	if n < 3 || s[0] == '`' && strings.Contains(s[n:], "`") {
		return ""
	}
	return s[:n]
}

func fencedCode(lines []string, ind int, open string) (*Node, int) {
	info := strings.TrimSpace(rest(lines[0])[len(open):])
	var b strings.Builder
	i := 1
	for ; i < len(lines); i++ {
		l := lines[i]
		if closes(l, open) {
			i++
			break
		}
		b.WriteString(strip(l, min(ind, indent(l))))
		b.WriteByte('\n')
	}
	if f := strings.Fields(info); len(f) > 0 {
		info = unescape(f[0])
	}
	return &Node{Kind: CodeBlock, Text: b.String(), Info: info}, i
}

// closes says whether l closes the code block that open opened: as many
// of its characters or more, and nothing else.
func closes(l, open string) bool {
	c := strings.TrimRight(rest(l), " \t")
	return indent(l) < 4 && strings.HasPrefix(c, open) && strings.Trim(c, open[:1]) == ""
}

func atxLevel(s string) int {
	n := len(s) - len(strings.TrimLeft(s, "#"))
	if n < 1 || n > 6 || n < len(s) && s[n] != ' ' && s[n] != '\t' {
		return 0
	}
	return n
}

func atxText(s string) string {
	t := strings.TrimSpace(strings.TrimLeft(s, "#"))
	if c := strings.TrimRight(t, "#"); c == "" || strings.HasSuffix(c, " ") || strings.HasSuffix(c, "\t") {
		t = strings.TrimSpace(c)
	}
	return t
}

func thematicBreak(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if c != '-' && c != '*' && c != '_' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case c:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// setextLevel is the level of a heading underlined by s, or 0.
func setextLevel(s string) int {
	if indent(s) >= 4 {
		return 0
	}
	t := strings.Trim(s, " \t")
	switch {
	case t == "" || strings.Contains(t, " "):
		return 0
	case strings.Trim(t, "=") == "":
		return 1
	case strings.Trim(t, "-") == "":
		return 2
	}
	return 0
}

// interrupts says whether a line ends the paragraph before it.
func interrupts(l string) bool {
	ind := indent(l)
	if blank(l) {
		return true
	}
	if ind >= 4 {
		return false
	}
	s := rest(l)
	if fence(s) != "" || atxLevel(s) > 0 || thematicBreak(s) || s[0] == '>' {
		return true
	}
	if m := listMarker(s); m.width > 0 && !blank(s[m.width:]) && (!m.ordered || m.start == 1) {
		return true
	}
	h := htmlStart(s)
	return h != htmlNone && h != htmlTag
}

func paragraph(lines []string) (*Node, int) {
	var text []string
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if i > 0 {
			if lvl := setextLevel(l); lvl > 0 {
				return &Node{Kind: Heading, Level: lvl, Text: strings.TrimRight(strings.Join(text, "\n"), " \t")}, i + 1
			}
			if interrupts(l) {
				break
			}
		}
		text = append(text, rest(l))
	}
	return &Node{Kind: Paragraph, Text: strings.TrimRight(strings.Join(text, "\n"), " \t")}, i
}

// lazy says whether l, after lines of a container, continues the
// paragraph they end with.
func lazy(l string) bool { return !interrupts(l) && setextLevel(l) == 0 }

func blockquote(lines []string, depth int) (*Node, int) {
	var inner []string
	var t tail
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		ind := indent(l)
		switch {
		case ind < 4 && strings.HasPrefix(rest(l), ">"):
			s := rest(l)[1:]
			switch {
			case strings.HasPrefix(s, " "):
				s = s[1:]
			case strings.HasPrefix(s, "\t"):
				// The tab is the marker's space and what is left of it.
				s = strings.Repeat(" ", 3-(ind+1)%4) + s[1:]
			}
			inner = append(inner, s)
			t.add(s)
		case t.para && lazy(l):
			inner = append(inner, l)
		default:
			return &Node{Kind: Blockquote, Children: parseBlocks(inner, depth)}, i
		}
	}
	return &Node{Kind: Blockquote, Children: parseBlocks(inner, depth)}, i
}

// A tail follows the lines of a container as they are added, to tell
// whether the last is in a paragraph, which a lazy line may continue,
// without parsing them again at each line.
type tail struct {
	fence string // of a code block still open
	para  bool
}

func (t *tail) add(l string) {
	ind := indent(l)
	switch {
	case t.fence != "":
		if closes(l, t.fence) {
			t.fence = ""
		}
		t.para = false
	case blank(l):
		t.para = false
	case ind >= 4:
		// A paragraph's continuation, or indented code.
	case fence(rest(l)) != "":
		t.fence, t.para = fence(rest(l)), false
	case t.para && setextLevel(l) > 0, atxLevel(rest(l)) > 0, thematicBreak(rest(l)), htmlStart(rest(l)) != htmlNone:
		t.para = false
	default:
		// A paragraph's line, or one in a quote or an item nested here.
		t.para = true
	}
}

type marker struct {
	width   int  // bytes of the marker and the spaces after it; 0: none
	cols    int  // the columns of the same, where the item's content starts
	ordered bool // 1. or 1)
	start   int
	char    byte // -, +, *, . or )
}

// listMarker reads the marker of a list item at the start of s.
func listMarker(s string) marker {
	var m marker
	if s == "" {
		return m
	}
	n := 0
	switch {
	case s[0] == '-' || s[0] == '+' || s[0] == '*':
		m.char, n = s[0], 1
	default:
		for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
			m.start = m.start*10 + int(s[n]-'0')
			n++
		}
		if n == 0 || n >= len(s) || s[n] != '.' && s[n] != ')' {
			return marker{}
		}
		m.ordered, m.char = true, s[n]
		n++
	}
	if n < len(s) && s[n] != ' ' && s[n] != '\t' {
		return marker{}
	}
	after := s[n:]
	ws := len(after) - len(rest(after))
	switch spaces := indent(after); {
	case ws == len(after): // an empty item
		m.width, m.cols = len(s), n+1
	case spaces > 4: // the content is indented code: one space is the marker's
		m.width, m.cols = n+1, n+1
	default:
		m.width, m.cols = n+ws, n+spaces
	}
	return m
}

func list(lines []string, depth int) (*Node, int) {
	first := listMarker(rest(lines[0]))
	n := &Node{Kind: List, Ordered: first.ordered, Start: first.start, Marker: first.char, Tight: true}
	i := 0
	for i < len(lines) {
		next := i
		for next < len(lines) && blank(lines[next]) {
			next++
		}
		if next == len(lines) {
			break
		}
		l := lines[next]
		ind := indent(l)
		if ind >= 4 || thematicBreak(rest(l)) {
			break
		}
		m := listMarker(rest(l))
		if m.width == 0 || m.ordered != first.ordered || m.char != first.char {
			break
		}
		if next > i {
			n.Tight = false // a blank line between two items
		}
		item, used := listItem(lines[next:], rest(l)[m.width:], ind+m.cols, depth)
		n.Children = append(n.Children, item)
		n.Tight = n.Tight && item.Tight
		i = next + used
	}
	return n, i
}

// listItem reads an item whose content starts at column offset of its first
// line, and how many lines it takes. An item whose blocks are apart makes
// its list loose (Tight false on the item tells list so).
func listItem(lines []string, first string, offset, depth int) (*Node, int) {
	content := []string{first}
	if blank(content[0]) && len(lines) > 1 && blank(lines[1]) {
		// An item starts with at most one blank line.
		return newItem(content, 1, depth)
	}
	var t tail
	t.add(content[0])
	i := 1
	for ; i < len(lines); i++ {
		l := lines[i]
		switch {
		case blank(l):
			content = append(content, "")
			t.add("")
		case indent(l) >= offset:
			content = append(content, strip(l, offset))
			t.add(strip(l, offset))
		case t.para && lazy(l) && (indent(l) >= 4 || listMarker(rest(l)).width == 0):
			// Not a lazy line if it starts the list's next item.
			content = append(content, l)
		default:
			return newItem(content, i, depth)
		}
	}
	return newItem(content, i, depth)
}

// newItem makes an item of its content lines; the trailing blank lines are
// not its own.
func newItem(content []string, used, depth int) (*Node, int) {
	end := len(content)
	// The first line, the marker's, is the item's even when blank.
	for end > 1 && blank(content[end-1]) {
		end--
	}
	// Blank lines left out of the item are left to the list.
	used -= len(content) - end
	content = content[:end]
	blocks, apart := blocksOf(content, depth)
	return &Node{Kind: Item, Children: blocks, Tight: !apart}, used
}

type htmlKind uint8

const (
	htmlNone     htmlKind = iota
	htmlRaw               // <script, <pre, <style, <textarea: to its closing tag
	htmlComment           // <!-- to -->
	htmlPI                // <? to ?>
	htmlDecl              // <!X to >
	htmlCDATA             // <![CDATA[ to ]]>
	htmlBlockTag          // a block-level tag: to a blank line
	htmlTag               // any other whole tag alone on its line: to a blank line
)

// htmlEnds are the ends of the HTML blocks that end with a string.
var htmlEnds = [...]string{htmlComment: "-->", htmlPI: "?>", htmlDecl: ">", htmlCDATA: "]]>"}

// blockTags are the tags that start an HTML block that may interrupt a
// paragraph (CommonMark's sixth kind), each between spaces.
const blockTags = " address article aside base basefont blockquote body caption center col colgroup dd details dialog dir div dl dt fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hr html iframe legend li link main menu menuitem nav noframes ol optgroup option p param search section summary table tbody td tfoot th thead title tr track ul "

func htmlStart(s string) htmlKind {
	if s == "" || s[0] != '<' {
		return htmlNone
	}
	switch {
	case strings.HasPrefix(s, "<!--"):
		return htmlComment
	case strings.HasPrefix(s, "<?"):
		return htmlPI
	case strings.HasPrefix(s, "<![CDATA["):
		return htmlCDATA
	case len(s) > 2 && s[1] == '!' && isLetter(s[2]):
		return htmlDecl
	}
	name := s[1:]
	closing := strings.HasPrefix(name, "/")
	name = strings.TrimPrefix(name, "/")
	end := 0
	for end < len(name) && (isAlnum(name[end]) || end > 0 && name[end] == '-') {
		end++
	}
	if end == 0 || !isLetter(name[0]) {
		return htmlNone
	}
	tag, rest := strings.ToLower(name[:end]), name[end:]
	if rest != "" && rest[0] != ' ' && rest[0] != '>' && !strings.HasPrefix(rest, "/>") {
		return htmlNone
	}
	switch {
	case !closing && (tag == "script" || tag == "pre" || tag == "style" || tag == "textarea"):
		return htmlRaw
	case strings.Contains(blockTags, " "+tag+" "):
		return htmlBlockTag
	case wholeTag(strings.TrimRight(s, " \t")):
		return htmlTag
	}
	return htmlNone
}

// wholeTag says whether s is one open or closing tag.
func wholeTag(s string) bool {
	if strings.HasPrefix(s, "</") {
		return closingTag(s) == len(s)
	}
	return (&inlineParser{s: s}).openTag(0) == len(s)
}

func htmlBlock(lines []string, kind htmlKind) (*Node, int) {
	var b strings.Builder
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if (kind == htmlBlockTag || kind == htmlTag) && blank(l) {
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
		lower := strings.ToLower(l)
		ended := false
		switch kind {
		case htmlRaw:
			ended = strings.Contains(lower, "</script>") || strings.Contains(lower, "</pre>") || strings.Contains(lower, "</style>") || strings.Contains(lower, "</textarea>")
		case htmlComment, htmlPI, htmlDecl, htmlCDATA:
			from := 0
			if i == 0 {
				from = min(len(l), indent(l)+2) // past the opening <!, <?
			}
			ended = strings.Contains(l[from:], htmlEnds[kind])
		}
		if ended {
			i++
			break
		}
	}
	return &Node{Kind: HTMLBlock, Text: b.String()}, i
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isAlnum(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' }
