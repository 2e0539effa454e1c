// Package streamfile appends to a file that is written as a stream and
// rarely read back soon, such as a session's transcript: behind the bytes
// written, it has the system write the file's pages out and drop them
// from its cache.
//
// Pages a stream leaves in the cache stay there until memory runs short,
// so each new page of the stream is memory the system has not touched
// for a while; on a virtual machine, whose host takes back what the guest
// leaves unused, that made the write of a fast stream's transcript more
// than half of the session process's time. Pages dropped behind the
// stream are reused by the next writes, and the stream no longer pushes
// the rest of the machine's files out of the cache.
package streamfile

import (
	"io"
	"os"
)

// File appends to an *os.File. It is not safe for concurrent use; a
// recorder serialises its writes.
type File struct {
	f *os.File
	// written is the file's size as this File knows it: the size it had
	// when opened, and the bytes appended since.
	written int64
	// flushed is where the last writeback started; pages before
	// flushed-lag are dropped once they are clean.
	flushed int64
}

// The writeback of a stream's pages starts every step bytes, and pages
// are dropped lag bytes behind the end: far enough that a page's
// writeback has usually ended when it is dropped (a page still dirty is
// left in the cache), near enough that the pages reused are recent.
const (
	step = 8 << 20
	lag  = 32 << 20
)

// New appends to f, whose current size is where the stream starts.
func New(f *os.File) *File {
	s := &File{f: f}
	if st, err := f.Stat(); err == nil {
		s.written, s.flushed = st.Size(), st.Size()
	}
	return s
}

var _ io.WriteCloser = (*File)(nil)

func (s *File) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	s.written += int64(n)
	if s.written-s.flushed >= step {
		advise(s.f, s.flushed, s.written)
		s.flushed = s.written
	}
	return n, err
}

// Close closes the file; its pages are written back as usual.
func (s *File) Close() error { return s.f.Close() }
