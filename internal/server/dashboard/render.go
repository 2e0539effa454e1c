package dashboard

import (
	"bytes"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// feeder gives a transcript's complete lines, as they come, to a Log. A
// line that cannot be read is said so in the view.
type feeder struct {
	log     *sessionview.Log
	partial []byte // a line whose newline has not come yet
}

func (f *feeder) feed(b []byte) {
	f.partial = append(f.partial, b...)
	for {
		line, rest, ok := bytes.Cut(f.partial, []byte("\n"))
		if !ok {
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			f.log.Record(line)
		}
		f.partial = rest
	}
}

// textRenderer renders a transcript's lines as `sessions log` does: what
// the client received, redacted as it was.
type textRenderer struct {
	feeder
	out  bytes.Buffer
	term *client.Terminal
}

func newTextRenderer() *textRenderer {
	r := &textRenderer{}
	r.term = &client.Terminal{Out: &r.out, Err: &r.out}
	r.log = &sessionview.Log{Term: r.term, Err: &r.out}
	return r
}

// text renders b's lines, closes an open turn, and returns the text.
func (r *textRenderer) text(b []byte) string {
	r.feed(b)
	r.term.EndTurn("")
	return r.out.String()
}

// conversationFeeder renders a transcript's lines as a conversation.
type conversationFeeder struct {
	feeder
	conv *conversation
	errs bytes.Buffer
}

func newConversationFeeder() *conversationFeeder {
	f := &conversationFeeder{conv: newConversation()}
	f.log = &sessionview.Log{Term: f.conv, Err: &f.errs}
	return f
}

// add renders b's lines and returns the blocks they add or change.
func (f *conversationFeeder) add(b []byte) []*block {
	f.feed(b)
	if f.errs.Len() > 0 {
		f.conv.Notice(f.errs.String())
		f.errs.Reset()
	}
	return f.conv.changed()
}
