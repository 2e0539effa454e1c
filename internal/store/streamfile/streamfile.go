// Package streamfile appends to a file that is written as a stream and
// rarely read back soon, such as a session's transcript, without filling
// the system's page cache with it: the system is told to write its pages
// out and drop them behind the stream.
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
	// flushed is where the last writeback started; its pages before
	// flushed-lag are dropped once clean.
	flushed int64
}

// The writeback of a stream starts every step bytes, and pages are
// dropped lag bytes behind the end: far enough that a page's writeback
// has usually ended when it is dropped (a page still dirty is left in the
// cache), near enough that the pages reused are recent.
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

// Write appends p through the page cache, dropping its pages behind the
// stream. When it returns, the file holds p.
func (s *File) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	s.written += int64(n)
	if s.written-s.flushed >= step {
		advise(s.f, s.flushed, s.written)
		s.flushed = s.written
	}
	return n, err
}

// Truncate cuts the file to size, which is at most what it holds, and
// appends from there.
func (s *File) Truncate(size int64) error {
	if err := s.f.Truncate(size); err != nil {
		return err
	}
	s.written, s.flushed = size, min(s.flushed, size)
	return nil
}

// Close closes the file; what it holds was written by each Write.
func (s *File) Close() error { return s.f.Close() }
