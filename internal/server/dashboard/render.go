package dashboard

import (
	"bytes"
	"io"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// feeder gives a transcript's complete lines, as they come, to a Log. A
// line that cannot be read is said so in the view.
type feeder struct {
	log     *sessionview.Log
	partial []byte // a line whose newline has not come yet
}

// Write feeds b: a transcript streamed through it is held a line at a
// time.
func (f *feeder) Write(b []byte) (int, error) {
	f.feed(b)
	return len(b), nil
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
	if len(f.partial) == 0 {
		f.partial = nil // a long line's room goes with it
	}
}

// textRenderer renders a transcript's lines as `sessions log` does: what
// the client received, redacted as it was.
type textRenderer struct {
	feeder
	term *client.Terminal
}

// newTextRenderer renders into out.
func newTextRenderer(out io.Writer) *textRenderer {
	r := &textRenderer{term: &client.Terminal{Out: out, Err: out}}
	r.log = &sessionview.Log{Term: r.term, Err: out}
	return r
}

// end closes an open turn.
func (r *textRenderer) end() { r.term.EndTurn("") }

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

// readChunks renders the lines rd reads, each with the number of its
// chunk.
func (f *conversationFeeder) readChunks(rd *sqlstore.ChunkReader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			f.conv.inChunk(rd.Chunk())
			f.feed(buf[:n])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
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
