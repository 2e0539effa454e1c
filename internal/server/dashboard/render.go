package dashboard

import (
	"bytes"
	"fmt"
	"io"
	"net/url"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// feeder gives a transcript's complete lines, as they come, to record (a
// Log's Record: a line that cannot be read is said so in the view).
type feeder struct {
	record  func(line []byte)
	partial []byte // a line whose newline has not come yet
	// maxLine, when not 0, bounds the lines given to record: a longer one is
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
			f.record(line)
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
	r.record = (&sessionview.Log{Term: r.term, Err: out}).Record
	return r
}

// end closes an open turn.
func (r *textRenderer) end() { r.term.EndTurn("") }

// conversationFeeder renders a transcript's lines as a conversation.
type conversationFeeder struct {
	feeder
	conv     *conversation
	errs     bytes.Buffer
	download string // the transcript's, which notes of what is left out link to
}

// maxRecord bounds the records a conversation shows: a longer one (a tool
// call's content of many MB) is a note, and the downloads have it.
const maxRecord = 1 << 20

// newConversationFeeder renders the transcript of session id, whose
// download its notes of what they leave out link to.
func newConversationFeeder(id string) *conversationFeeder {
	f := &conversationFeeder{conv: newConversation(), download: "/sessions/" + url.PathEscape(id) + "/transcript.jsonl"}
	f.record = (&sessionview.Log{Term: f.conv, Err: &f.errs}).Record
	f.maxLine = maxRecord
	f.skip = func(size int) {
		f.leftOut(fmt.Sprintf("· a record of %.1f MB, too long to show here", float64(size)/1e6))
	}
	return f
}

// leftOut adds a note of what the conversation leaves out, with a link to
// the transcript's download, which holds it.
func (f *conversationFeeder) leftOut(text string) {
	f.conv.add(&block{Kind: "note", Note: sessionview.Note{Text: text}, Download: f.download})
}

// readChunks renders the lines rd reads, each with the number of its
// chunk: of a chunk larger than a page's window (many records written at
// once), its latest records, a window of them, after a note of those left
// out, so that what a page or an event holds stays bounded.
func (f *conversationFeeder) readChunks(rd *sqlstore.ChunkReader) error {
	buf := make([]byte, 32<<10)
	tail := newChunkTail()
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			if c := rd.Chunk(); c != tail.chunk {
				f.show(tail)
				tail.chunk = c
			}
			tail.feed(buf[:n])
		}
		if err == io.EOF {
			f.show(tail)
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// show renders a chunk's kept lines and empties tail.
func (f *conversationFeeder) show(t *chunkTail) {
	if len(t.lines) == t.head {
		return
	}
	f.conv.inChunk(t.chunk)
	if t.dropped > 0 {
		f.leftOut(fmt.Sprintf("· %d earlier records written with these (%.1f MB) are left out: a page shows about %d MiB of a transcript", t.dropped, float64(t.droppedBytes)/1e6, pageBytes>>20))
	}
	for _, l := range t.lines[t.head:] {
		if l.text == nil {
			f.skip(l.size)
		} else {
			f.record(l.text)
		}
	}
	clear(t.lines)
	t.lines, t.head, t.held, t.dropped, t.droppedBytes = t.lines[:0], 0, 0, 0, 0
}

// chunkTail keeps the latest lines of a transcript's chunk as it is read,
// at most pageBytes of them, and counts those it drops before them.
type chunkTail struct {
	feeder
	chunk int64
	lines []tailLine
	head  int // lines[:head] are dropped
	held  int // the bytes of lines[head:]
	// dropped lines, of droppedBytes, came before those kept.
	dropped, droppedBytes int
}

// tailLine is a line a chunkTail keeps; one longer than maxLine is kept
// as its size alone.
type tailLine struct {
	text []byte
	size int
}

func newChunkTail() *chunkTail {
	t := &chunkTail{}
	t.maxLine = maxRecord
	t.record = func(line []byte) { t.keep(tailLine{bytes.Clone(line), len(line)}) }
	t.skip = func(size int) { t.keep(tailLine{size: size}) }
	return t
}

func (t *chunkTail) keep(l tailLine) {
	t.lines = append(t.lines, l)
	t.held += len(l.text)
	for t.held > pageBytes && t.head < len(t.lines)-1 {
		d := &t.lines[t.head]
		t.held -= len(d.text)
		t.dropped++
		t.droppedBytes += d.size + 1
		*d = tailLine{}
		t.head++
	}
	// The dropped lines' room is taken back once they are most of it.
	if t.head > 1024 && 2*t.head > len(t.lines) {
		n := copy(t.lines, t.lines[t.head:])
		clear(t.lines[n:])
		t.lines, t.head = t.lines[:n], 0
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
