package client

import (
	"fmt"
	"io"
	"strings"
)

// A screen is what a Terminal writes on: the rendered session on out,
// diagnostics and other logs on err, and a spinner on status. It knows
// where the cursor is and which text stream is being written, so that a
// new block starts on a fresh line. The Terminal's lock guards it.
type screen struct {
	// Copied from the Terminal's exported fields each time it is locked.
	out, err, status io.Writer
	color, markdown  bool
	width            int

	stream  streamKind // the kind of the text stream being written
	started bool       // the stream has written its first line prefix
	midLine bool       // out's cursor is not at the start of a line
	md      *markdown  // nil until the first message with markdown
	spin    spinner
}

// A streamKind is a kind of text rendered as a stream of chunks.
type streamKind uint8

const (
	noStream streamKind = iota
	messageStream
	thoughtStream
	userStream
)

// ANSI styles used when Color is set.
const (
	styleReset   = "\x1b[0m"
	styleBold    = "\x1b[1m"
	styleDim     = "\x1b[2m"
	styleThought = "\x1b[2;3m"
	styleRed     = "\x1b[31m"
	styleGreen   = "\x1b[32m"
	styleYellow  = "\x1b[33m"
	styleCyan    = "\x1b[36m"
)

// text writes a chunk of a text stream of kind k. A chunk of another kind
// than the stream being written ends that stream's line first. Each line of
// a thought or a user message gets a prefix, written with its first
// character so that a line is never left holding only a prefix.
func (s *screen) text(k streamKind, chunk string) {
	if k != s.stream {
		s.endLine()
		s.stream, s.started = k, false
	}
	if k == messageStream && s.markdownOn() {
		s.write(s.md.add(chunk))
		return
	}
	for chunk != "" {
		l, rest, nl := strings.Cut(chunk, "\n")
		if l != "" {
			if !s.midLine {
				s.write(s.prefix(k))
			}
			s.write(s.paint(streamStyle(k), l))
			s.midLine = true
		}
		if nl {
			s.write("\n")
			s.midLine = false
		}
		chunk = rest
	}
}

// streamStyle returns the style of a kind of stream.
func streamStyle(k streamKind) string {
	if k == thoughtStream {
		return styleThought
	}
	return ""
}

// thinking starts a thought; its later lines are indented to match.
const thinking = "thinking: "

// prefix returns the prefix of the next line of a stream of kind k.
func (s *screen) prefix(k streamKind) string {
	switch k {
	case thoughtStream:
		if s.started {
			return strings.Repeat(" ", len(thinking))
		}
		s.started = true
		return s.paint(styleThought, thinking)
	case userStream:
		return s.paint(styleCyan, "> ")
	}
	return ""
}

// markdownOn tells whether messages are rendered as Markdown, making the
// renderer when first needed.
func (s *screen) markdownOn() bool {
	if !s.markdown {
		return false
	}
	if s.md == nil {
		s.md = newMarkdown(s.width, s.color)
	}
	return true
}

// endLine ends the text stream being written, and its line if the cursor is
// not at the start of one.
func (s *screen) endLine() {
	if s.md != nil {
		s.write(s.md.flush())
	}
	if s.midLine {
		s.write("\n")
		s.midLine = false
	}
	s.stream = noStream
}

// line writes l and a newline; the cursor must be at the start of a line.
func (s *screen) line(l string) {
	s.write(l + "\n")
}

// write writes text to out, in place of the spinner, which stops: what it
// waited for has come.
func (s *screen) write(text string) {
	if text == "" {
		return
	}
	s.spin.stop(s.status)
	if s.out != nil {
		io.WriteString(s.out, text)
	}
}

// paint wraps text in style when color is set.
func (s *screen) paint(style, text string) string {
	if !s.color || style == "" || text == "" {
		return text
	}
	return style + text + styleReset
}

// diag writes a diagnostic line to err.
func (s *screen) diag(format string, args ...any) {
	s.spin.stop(s.status)
	if s.err != nil {
		fmt.Fprintf(s.err, "client: "+format+"\n", args...)
	}
}
