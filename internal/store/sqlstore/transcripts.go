package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/klauspost/compress/flate"
)

// Transcript opens a session's transcript for appending. The lines of a
// Write (JSONL) are appended to the session's file, and their chunk is
// committed, once their newline is written; Close stores a last line
// without one.
func (s *transcriptStore) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	if err := s.exists(ctx, id); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return &transcript{s: s, ctx: context.WithoutCancel(ctx), id: id}, nil
}

// exists returns an error wrapping session.ErrNotFound for a session the
// store does not hold.
func (s *transcriptStore) exists(ctx context.Context, id string) error {
	var one int
	err := s.read.row(ctx, "SELECT 1 FROM sessions WHERE id = ?", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("session %s: %s: %w", id, s.where, err)
	}
	return nil
}

var (
	_ lifecycle.CallTranscripts = (*transcriptStore)(nil)
	_ lifecycle.CallTranscript  = (*transcript)(nil)
)

type transcript struct {
	s *transcriptStore
	// ctx is the opener's, without its end: the lines written before a run
	// ends are committed all the same, as its Close stores the last one.
	ctx    context.Context
	id     string
	file   *sessionFile // opened at the first lines written
	rest   []byte       // a line not ended yet
	closed bool
	// run and call are those of the lines written next (Call), stored
	// with their chunk.
	run  int
	call uint64
}

// Call says that the lines written next are those of call of run: their
// chunk keeps the number, which TranscriptCall reads.
func (t *transcript) Call(run int, call uint64) { t.run, t.call = run, call }

// TranscriptCall is the number of the last call of run whose lines the
// session's transcript holds; 0 if none.
func (s *transcriptStore) TranscriptCall(ctx context.Context, id string, run int) (uint64, error) {
	if err := checkSessionID(id); err != nil {
		return 0, err
	}
	var call int64
	err := s.read.row(ctx, "SELECT COALESCE(MAX(last_call), 0) FROM transcript_chunks WHERE session_id = ? AND run = ?", id, run).Scan(&call)
	if err != nil {
		return 0, fmt.Errorf("session %s: transcript: the last call of run %d: %s: %w", id, run, s.where, err)
	}
	return uint64(call), nil
}

// Write stores the complete lines of p as one chunk: a transcript is
// written in batches of lines (acp.JSONLRecorder), and a row per line
// would cost the server a statement per message.
func (t *transcript) Write(p []byte) (int, error) {
	if t.closed {
		return 0, fmt.Errorf("session %s: transcript: %w", t.id, io.ErrClosedPipe)
	}
	end := bytes.LastIndexByte(p, '\n')
	if end < 0 {
		t.rest = append(t.rest, p...)
		return len(p), nil
	}
	lines := p[:end+1]
	if len(t.rest) > 0 {
		// The end of a line begun before: stored with it.
		lines = append(t.rest, lines...)
	}
	if err := t.store(lines); err != nil {
		return 0, err
	}
	t.rest = append(t.rest[:0], p[end+1:]...)
	return len(p), nil
}

// store appends lines, each ended by a newline, to the session's file,
// and commits their chunk.
func (t *transcript) store(lines []byte) error {
	if t.file == nil {
		sf, err := t.s.acquire(t.ctx, t.id)
		if err != nil {
			return err
		}
		t.file = sf
	}
	return t.s.append(t.ctx, t.file, lines, t.run, t.call)
}

// Close stores what is left of a last line without a newline.
func (t *transcript) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if len(t.rest) > 0 {
		err = t.store(append(t.rest, '\n'))
		t.rest = nil
	}
	if t.file != nil {
		t.s.release(t.file)
	}
	return err
}

// ReadTranscript returns a session's transcript: its lines in the order
// they were written, each ended by a newline.
func (s *transcriptStore) ReadTranscript(ctx context.Context, id string) (io.ReadCloser, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	if err := s.exists(ctx, id); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return s.readChunks(ctx, id, 0, math.MaxInt64)
}

// readChunks reads the lines of the chunks of a session numbered after
// from to to, in order.
func (s *transcriptStore) readChunks(ctx context.Context, id string, after, to int64) (*ChunkReader, error) {
	r := &ChunkReader{ctx: ctx, s: s, id: id, path: s.transcripts.path(id), chunk: after, to: to}
	if err := r.nextPage(); err != nil {
		return nil, err
	}
	return r, nil
}

// chunkPage is how many chunks' rows a ChunkReader reads at a time: it
// holds no database connection while its reader reads, however slowly.
const chunkPage = 256

// chunkRow is where a chunk's lines are: in the file, or deflated in its
// row (offset -1).
type chunkRow struct{ seq, offset, size int64 }

// ChunkReader streams the chunks: each from the session's file, or,
// for one stored deflated, inflated as it is read, so that a long
// transcript is not held in memory at once. A Read returns lines of one
// chunk, whose number Chunk gives.
type ChunkReader struct {
	ctx   context.Context // the reading's, which its queries take
	s     *transcriptStore
	id    string
	chunk int64 // the chunk being read
	to    int64 // the last chunk to read
	page  []chunkRow
	last  bool // the page is the last one
	path  string
	file  *os.File // the session's, opened at its first chunk
	// section is the current chunk's lines in the file; nil between them.
	section *io.LimitedReader
	packed  *bytes.Reader     // the deflated chunk being read; nil before the first
	stream  io.ReadCloser     // its deflate stream being read; nil between them
	left    *io.LimitedReader // of stream: the bytes it may still inflate to
	err     error
}

// nextPage reads the rows of the chunks after the current one.
func (r *ChunkReader) nextPage() error {
	rows, err := r.s.read.rows(r.ctx, "SELECT seq, file_offset, file_size FROM transcript_chunks WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?", r.id, r.chunk, r.to, chunkPage)
	if err != nil {
		return fmt.Errorf("session %s: transcript: %s: %w", r.id, r.s.where, err)
	}
	defer rows.Close()
	r.page = r.page[:0]
	for rows.Next() {
		var c chunkRow
		if err := rows.Scan(&c.seq, &c.offset, &c.size); err != nil {
			return fmt.Errorf("session %s: transcript: %s: %w", r.id, r.s.where, err)
		}
		r.page = append(r.page, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("session %s: transcript: %s: %w", r.id, r.s.where, err)
	}
	r.last = len(r.page) < chunkPage
	return nil
}

// maxChunk bounds what one deflate stream inflates to. A stream holds at
// most one append of a run (at most 65 MiB), or the lines of a batch of
// them (4 MiB) and of a line begun before (64 MiB at most, as an ACP
// message): the bound keeps a stream that a runner deflated from
// inflating without end.
const maxChunk = 256 << 20

func (r *ChunkReader) Read(p []byte) (int, error) {
	for r.err == nil {
		switch {
		case r.section != nil:
			return r.readSection(p)
		case r.stream != nil:
		case r.packed != nil && r.packed.Len() > 0:
			r.open()
		default:
			r.err = r.next()
			continue
		}
		n, err := r.left.Read(p)
		if r.left.N == 0 {
			return 0, r.fail(fmt.Errorf("a chunk's deflate stream inflates to more than %d bytes", maxChunk))
		}
		if n > 0 {
			return n, nil
		}
		if err != io.EOF {
			return 0, r.fail(fmt.Errorf("a chunk does not inflate: %w", err))
		}
		r.stream.Close()
		r.stream = nil
	}
	return 0, r.err
}

// readSection reads the current chunk's lines from the file.
func (r *ChunkReader) readSection(p []byte) (int, error) {
	n, err := r.section.Read(p)
	switch {
	case r.section.N == 0:
		r.section = nil
	case err == io.EOF:
		return n, r.fail(fmt.Errorf("%s ends before the lines its database rows account for: lines are lost", r.path))
	case err != nil:
		return n, r.fail(err)
	}
	return n, nil
}

// open opens the next deflate stream of the chunk.
func (r *ChunkReader) open() {
	r.stream = flate.NewReader(r.packed) // it reads to the stream's end, not past
	r.left = &io.LimitedReader{R: r.stream, N: maxChunk + 1}
}

// next reads the next chunk; io.EOF after the last.
func (r *ChunkReader) next() error {
	if len(r.page) == 0 && !r.last {
		if err := r.nextPage(); err != nil {
			return r.fail(err)
		}
	}
	if len(r.page) == 0 {
		return io.EOF
	}
	c := r.page[0]
	r.page, r.chunk = r.page[1:], c.seq
	switch {
	case c.offset < 0:
		var packed []byte
		if err := r.s.read.row(r.ctx, "SELECT lines FROM transcript_chunks WHERE seq = ?", c.seq).Scan(&packed); err != nil {
			return r.fail(fmt.Errorf("%s: %w", r.s.where, err))
		}
		r.packed = bytes.NewReader(packed)
		return nil
	case c.size == 0:
		return nil
	case r.file == nil:
		f, err := os.Open(r.path)
		if err != nil {
			return r.fail(err)
		}
		r.file = f
	}
	r.section = &io.LimitedReader{R: io.NewSectionReader(r.file, c.offset, c.size), N: c.size}
	return nil
}

// Chunk is the number of the chunk the last Read read from.
func (r *ChunkReader) Chunk() int64 { return r.chunk }

func (r *ChunkReader) fail(err error) error {
	r.err = fmt.Errorf("session %s: transcript: %w", r.id, err)
	return r.err
}

func (r *ChunkReader) Close() error {
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}
