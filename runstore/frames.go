package runstore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// Frame is one call or answer of a store stream, whole: its line and the
// data after it, as a runner passes it on. A runner passes on whole frames
// only, so that a store stream cut by a broken connection leaves no half
// call or half answer before what comes on the next.
type Frame struct {
	Bytes []byte // the line, then its data; the FrameReader's until its next Next
	// Resync is the generation of an OpResync call or of a notice, else 0.
	Resync uint64
}

// FrameReader reads the frames of one direction of a store stream.
type FrameReader struct {
	r   *bufio.Reader
	buf []byte
}

// NewFrameReader reads frames from r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// frameHead is what a runner reads of a frame's line.
type frameHead struct {
	Op     Op     `json:"op"`
	Size   int    `json:"size"`
	Resync uint64 `json:"resync"`
}

// Next reads the next frame; io.EOF at the end of the stream, and
// io.ErrUnexpectedEOF when it ends within a frame.
func (fr *FrameReader) Next() (Frame, error) {
	line, err := fr.r.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return Frame{}, fmt.Errorf("store: a line longer than %d bytes", fr.r.Size())
	case err == io.EOF && len(line) > 0:
		return Frame{}, io.ErrUnexpectedEOF
	case err != nil:
		return Frame{}, err
	}
	var h frameHead
	if err := json.Unmarshal(line, &h); err != nil {
		return Frame{}, fmt.Errorf("store: a bad line %.200q: %w", line, err)
	}
	if h.Size < 0 || h.Size > maxData {
		return Frame{}, fmt.Errorf("store: data of %d bytes (at most %d)", h.Size, maxData)
	}
	n := len(line)
	fr.buf = slices.Grow(fr.buf[:0], n+h.Size)[:n+h.Size]
	copy(fr.buf, line)
	if _, err := io.ReadFull(fr.r, fr.buf[n:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	f := Frame{Bytes: fr.buf}
	if h.Resync != 0 && (h.Op == OpResync || h.Op == "") {
		f.Resync = h.Resync
	}
	return f, nil
}

// IsResync reports whether f is the OpResync call of generation gen.
func (f Frame) IsResync(gen uint64) bool { return f.Resync == gen && gen != 0 }

// Notice is the line a runner writes to its session process's end of the
// store when the run has a new store stream, of generation gen (2 and up:
// the first is the stream of the launch). The client sends again what was
// not answered, after an OpResync of gen, which the runner passes on
// first; it drops what the process sends before it.
func Notice(gen uint64) []byte {
	line, _ := json.Marshal(response{Resync: gen})
	return append(line, '\n')
}
