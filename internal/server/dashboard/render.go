package dashboard

import (
	"bytes"
	"fmt"
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
	// maxLine, when not 0, bounds the lines given to log: a longer one is
	// dropped as it comes, and skip told its size.
	maxLine int
	skip    func(size int)
	skipped int // the size so far of the line being dropped; 0: none
}

// Write feeds b: a transcript streamed through it is held a line at a
// time.
func (f *feeder) Write(b []byte) (int, error) {
	f.feed(b)
	return len(b), nil
}

func (f *feeder) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if f.skipped > 0 {
			if i < 0 {
				f.skipped += len(b)
				return
			}
			f.skip(f.skipped + i)
			f.skipped, b = 0, b[i+1:]
			continue
		}
		if i < 0 {
			f.partial = append(f.partial, b...)
			if f.maxLine > 0 && len(f.partial) > f.maxLine {
				f.skipped, f.partial = len(f.partial), nil
			}
			return
		}
		line := b[:i]
		if len(f.partial) > 0 {
			f.partial = append(f.partial, line...)
			line = f.partial
		}
		switch {
		case f.maxLine > 0 && len(line) > f.maxLine:
			f.skip(len(line))
		case len(bytes.TrimSpace(line)) > 0:
			f.log.Record(line)
		}
		f.partial, b = f.partial[:0], b[i+1:]
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

// maxRecord bounds the records a conversation shows: a longer one (a tool
// call's content of many MB) is a note, and the downloads have it.
const maxRecord = 1 << 20

func newConversationFeeder() *conversationFeeder {
	f := &conversationFeeder{conv: newConversation()}
	f.log = &sessionview.Log{Term: f.conv, Err: &f.errs}
	f.maxLine = maxRecord
	f.skip = func(size int) {
		f.conv.Notice(fmt.Sprintf("· a record of %.1f MB, too long to show here: the transcript's downloads hold it", float64(size)/1e6))
	}
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
