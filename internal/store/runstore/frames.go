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
	// Resync is the generation of an OpResync call, else 0.
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

// Next reads the next frame; io.EOF at the end of the stream, and an
// error wrapping io.ErrUnexpectedEOF when it ends within a frame.
func (fr *FrameReader) Next() (Frame, error) {
	// A call's line or an answer's: an answer's fields that a call does not
	// have are skipped.
	var h request
	frame, _, err := readFrame(fr.r, &h, func() int { return h.Size }, func(int) []byte { return fr.buf })
	if err != nil {
		if err != io.EOF {
			err = fmt.Errorf("store: %w", err)
		}
		return Frame{}, err
	}
	fr.buf = frame
	f := Frame{Bytes: frame}
	if h.Op == OpResync {
		f.Resync = h.Resync
	}
	return f, nil
}

// readFrame reads a frame: a line, which it decodes into v, and the data
// after it, of the size that size returns once v is decoded. It returns the
// line and the data, one after the other, in a buffer that buf gives for
// their size (nil: a new one), grown as needed, and the length of the
// line. It returns io.EOF at the end of r only, before a frame.
func readFrame(r *bufio.Reader, v any, size func() int, buf func(n int) []byte) ([]byte, int, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, 0, fmt.Errorf("%w: a line longer than %d bytes", ErrBroken, r.Size())
	case err == io.EOF && len(line) > 0:
		return nil, 0, io.ErrUnexpectedEOF
	case err != nil:
		return nil, 0, err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return nil, 0, fmt.Errorf("%w: a bad line %.200q: %v", ErrBroken, line, err)
	}
	n := size()
	if n < 0 || n > maxData {
		return nil, 0, fmt.Errorf("%w: data of %d bytes (at most %d)", ErrBroken, n, maxData)
	}
	var b []byte
	if buf != nil {
		b = buf(len(line) + n)
	}
	frame := slices.Grow(b[:0], len(line)+n)[:len(line)+n]
	copy(frame, line)
	if _, err := io.ReadFull(r, frame[len(line):]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("data: %w", err)
	}
	return frame, len(line), nil
}

// readData reads a frame (readFrame) and returns its data, its own; nil
// for none.
func readData(r *bufio.Reader, v any, size func() int) ([]byte, error) {
	frame, n, err := readFrame(r, v, size, nil)
	if err != nil || n == len(frame) {
		return nil, err
	}
	return frame[n:len(frame):len(frame)], nil
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
