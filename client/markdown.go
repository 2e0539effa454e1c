package client

import (
	"os"
	"regexp"
	"strings"

	"github.com/charmbracelet/glamour"
	"github.com/muesli/termenv"
)

// markdown renders the agent's messages for a terminal. Text is kept until
// a block (a paragraph, a list, a fenced code block) is complete, since a
// block cannot be laid out before its end; then the block is rendered and
// written. What remains is rendered when the message ends.
type markdown struct {
	r       *glamour.TermRenderer
	pending strings.Builder
	blocks  int  // blocks written in this message
	plain   bool // no styles at all: the renderer keeps bold and italics
}

// newMarkdown returns a renderer wrapping at width columns (0: 80) in the
// style $GLAMOUR_STYLE, else dark, without colours unless color is set.
func newMarkdown(width int, color bool) (*markdown, error) {
	if width <= 0 {
		width = 80
	}
	style, profile := "dark", termenv.Ascii
	if s := os.Getenv("GLAMOUR_STYLE"); s != "" {
		style = s
	}
	if color {
		profile = termenv.ANSI256
	}
	r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithColorProfile(profile), glamour.WithWordWrap(width))
	if err != nil {
		return nil, err
	}
	return &markdown{r: r, plain: !color}, nil
}

// add takes a chunk and returns what is ready to be written.
func (m *markdown) add(s string) string {
	m.pending.WriteString(s)
	text := m.pending.String()
	cut := blockEnd(text)
	if cut < 0 {
		return ""
	}
	m.pending.Reset()
	m.pending.WriteString(text[cut:])
	return m.render(text[:cut])
}

// flush returns the rest of the message, rendered, and starts a new one.
func (m *markdown) flush() string {
	text := m.pending.String()
	m.pending.Reset()
	out := m.render(text)
	m.blocks = 0
	return out
}

// render renders complete blocks, each ending its last line, separated
// from the blocks before them by a blank line.
func (m *markdown) render(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	out, err := m.r.Render(text)
	if err != nil {
		out = text // shown as it came rather than lost
	}
	if m.plain {
		out = sgr.ReplaceAllString(out, "")
	}
	out = trimPadding(strings.Trim(out, "\n")) + "\n"
	if m.blocks > 0 {
		out = "\n" + out
	}
	m.blocks++
	return out
}

// blockEnd returns the end of the last complete block of text (after the
// blank line that ends it, outside fenced code), or -1.
func blockEnd(text string) int {
	end, fenced := -1, false
	at := 0
	for l := range strings.Lines(text) {
		at += len(l)
		if !strings.HasSuffix(l, "\n") {
			break // a line still coming
		}
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fenced = !fenced
			if !fenced {
				end = at // a closed fence ends its block
			}
		case !fenced && t == "":
			end = at
		}
	}
	return end
}

// sgr is a style sequence.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// padding is what the renderer fills a line with up to the wrap width:
// spaces, each maybe in a style of its own.
var padding = regexp.MustCompile(`(?:\x1b\[[0-9;]*m| )+$`)

// trimPadding removes the padding of each line, which would wrap or fill
// the line of a terminal narrower than the wrap width.
func trimPadding(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if t := padding.ReplaceAllString(l, ""); t != l {
			if strings.Contains(t, "\x1b[") {
				t += styleReset
			}
			lines[i] = t
		}
	}
	return strings.Join(lines, "\n")
}
