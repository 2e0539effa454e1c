package client

import (
	"os"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/terminal/termmd"
)

// markdown renders the agent's messages for a terminal. Text is kept until
// a block (a paragraph, a list, a fenced code block) is complete, since a
// block cannot be laid out before its end; then the block is rendered and
// written. What remains is rendered when the message ends.
type markdown struct {
	r       *termmd.Renderer
	pending strings.Builder
	blocks  int // blocks written in this message
}

// newMarkdown returns a renderer wrapping at width columns (0: 80), in the
// style $GLAMOUR_STYLE names (light, or notty and ascii for none; anything
// else is dark: the variable keeps the meaning it had with the renderer
// the terminal used before), without styles unless color is set.
func newMarkdown(width int, color bool) *markdown {
	if width <= 0 {
		width = 80
	}
	style := termmd.Dark
	switch os.Getenv("GLAMOUR_STYLE") {
	case "light":
		style = termmd.Light
	case "notty", "ascii":
		style = termmd.Plain
	}
	if !color {
		style = termmd.Plain
	}
	return &markdown{r: termmd.New(width, style)}
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
	out := m.r.Render(text)
	if out == "" {
		return ""
	}
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
