// Package streamfile appends to a file that is written as a stream and
// rarely read back soon, such as a session's transcript, without filling
// the system's page cache with it.
//
// Where the file system takes them, the whole blocks of a large write
// (the chunks of a streamed transcript) are written directly (O_DIRECT):
// from the File's own buffer to the device, with no page of the cache to
// allocate, fill, write back and free. The last, unfinished block goes
// through the cache, so that the file holds every byte written as each
// Write returns, and is written again, whole, by the next large write.
// Small writes (a request's record) go through the cache: a direct write
// waits for the device, and they are on the way of a message. On a
// virtual machine, where each fresh page of the cache costs dearly (its
// host takes back what the guest leaves unused), writing a stream through
// the cache took more than four times the CPU time (BenchmarkStreamFile).
//
// Where direct writes are refused, the stream goes through the cache, and
// the system is told to write its pages out and drop them behind it.
package streamfile

import (
	"io"
	"os"
	"unsafe"
)

// File appends to an *os.File. It is not safe for concurrent use; a
// recorder serialises its writes.
type File struct {
	f *os.File
	// written is the file's size as this File knows it: the size it had
	// when opened, and the bytes appended since.
	written int64

	// direct is the file opened for direct writes; nil when the file
	// system refuses them.
	direct *os.File
	// pend is the file's bytes from base, a multiple of blockSize, to
	// the end of what was written, in an aligned buffer: between writes,
	// the unfinished last block. A large write goes through it, and its
	// whole blocks out directly.
	pend []byte
	base int64

	// flushed is where the last writeback of a stream through the cache
	// started; its pages before flushed-lag are dropped once clean.
	flushed int64
}

// The writeback of a stream through the cache starts every step bytes,
// and pages are dropped lag bytes behind the end: far enough that a
// page's writeback has usually ended when it is dropped (a page still
// dirty is left in the cache), near enough that the pages reused are
// recent.
const (
	step = 8 << 20
	lag  = 32 << 20
)

// Direct writes start at multiples of blockSize and are multiples of it
// in length, from a buffer aligned to it: 4096 suits the devices of 512
// and of 4096 bytes. They go out directChunk bytes at a time at most, for
// writes of directMin bytes or more.
const (
	blockSize   = 4096
	directChunk = 1 << 20
	directMin   = 64 << 10
)

// writeDirect writes p at off of the file opened for direct writes; tests
// replace it.
var writeDirect = (*os.File).WriteAt

// New appends to f, whose current size is where the stream starts.
func New(f *os.File) *File {
	s := &File{f: f}
	if st, err := f.Stat(); err == nil {
		s.written, s.flushed = st.Size(), st.Size()
	}
	s.openDirect()
	return s
}

var _ io.WriteCloser = (*File)(nil)

// Write appends p. When it returns, the file holds p.
func (s *File) Write(p []byte) (int, error) {
	if s.direct == nil {
		return s.writeCached(p)
	}
	if len(p) < directMin {
		// A record or a few: through the cache, as fast as it can be on
		// the way of a request. Only the unfinished block is kept, to be
		// written again whole by the next large write.
		n, err := s.f.Write(p)
		s.written += int64(n)
		s.keepLastBlock(p[:n])
		return n, err
	}
	s.growPend()
	// pend holds what the file holds from base: p goes at start.
	start := s.written
	n := 0
	for n < len(p) {
		k := copy(s.pend[len(s.pend):cap(s.pend)], p[n:])
		s.pend = s.pend[:len(s.pend)+k]
		n += k
		if len(s.pend) == cap(s.pend) {
			if err := s.writeBlocks(); err != nil {
				return s.fallBack(p, start, n, err)
			}
		}
	}
	return s.finish(p, start)
}

// AppendBuffer lends the File's own buffer to a large write of up to n
// bytes (between 64 KiB and 1 MiB): it returns an empty slice with room
// for them there, or nil when the stream does not write directly. What is
// appended to it, given to WriteAppended, goes out without being copied
// once more. Any other call on the File takes the loan back.
func (s *File) AppendBuffer(n int) []byte {
	if s.direct == nil || n < directMin || n > directChunk {
		return nil
	}
	s.growPend()
	return s.pend[len(s.pend):len(s.pend)]
}

// WriteAppended appends p, which was appended to the slice AppendBuffer
// returned; the room is the File's again once it returns. A p that is not
// there (it grew past the room lent) is written as Write writes it.
func (s *File) WriteAppended(p []byte) (int, error) {
	room := s.pend[len(s.pend):cap(s.pend)]
	if s.direct == nil || len(p) == 0 || len(p) > len(room) || &room[0] != &p[0] {
		return s.Write(p)
	}
	start := s.written
	s.pend = s.pend[:len(s.pend)+len(p)]
	return s.finish(p, start)
}

// growPend gives pend room for a chunk after the unfinished block it holds
// between writes.
func (s *File) growPend() {
	if cap(s.pend) < directChunk+blockSize {
		grown := aligned(directChunk + blockSize)
		s.pend = grown[:copy(grown[:len(s.pend)], s.pend)]
	}
}

// finish ends a large write of p, which went at start and is all in pend:
// its whole blocks go out directly, and the rest through the cache.
func (s *File) finish(p []byte, start int64) (int, error) {
	if err := s.writeBlocks(); err != nil {
		return s.fallBack(p, start, len(p), err)
	}
	// The bytes of the unfinished block that the file lacks go through
	// the cache: a reader of the file sees them now.
	if lacking := s.pend[s.written-s.base:]; len(lacking) > 0 {
		m, err := s.f.Write(lacking)
		s.written += int64(m)
		// What the file lacks is not kept: the next Write starts from
		// what it holds.
		s.pend = s.pend[:s.written-s.base]
		if err != nil {
			return int(s.written - start), err
		}
	}
	return len(p), nil
}

// keepLastBlock keeps in pend the file's unfinished last block, after p
// was appended to the file through the cache: pend followed by p was the
// file from base.
func (s *File) keepLastBlock(p []byte) {
	base := s.written &^ (blockSize - 1)
	keep := int(s.written - base)
	if keep <= len(p) {
		s.pend = s.pend[:copy(s.pend[:keep], p[len(p)-keep:])]
	} else {
		fromPend := keep - len(p)
		copy(s.pend, s.pend[len(s.pend)-fromPend:])
		s.pend = append(s.pend[:fromPend], p...)
	}
	s.base = base
}

// writeBlocks writes the whole blocks of pend directly and keeps the rest
// at its start. Of a write cut short, what went out is kept account of.
func (s *File) writeBlocks() error {
	whole := len(s.pend) &^ (blockSize - 1)
	if whole == 0 {
		return nil
	}
	n, err := writeDirect(s.direct, s.pend[:whole], s.base)
	s.written = max(s.written, s.base+int64(n))
	done := n &^ (blockSize - 1)
	s.base += int64(done)
	s.pend = s.pend[:copy(s.pend, s.pend[done:])]
	return err
}

// fallBack goes on through the cache after a direct write failed, with
// p[:n] copied to pend, of which the file holds what precedes s.written;
// p went at start. An error other than a refusal of direct writes is
// returned.
func (s *File) fallBack(p []byte, start int64, n int, err error) (int, error) {
	if !refused(err) {
		s.pend = s.pend[:s.written-s.base]
		return int(max(0, s.written-start)), err
	}
	unwritten := s.pend[s.written-s.base:]
	s.dropDirect()
	if _, err := s.writeCached(unwritten); err != nil {
		return int(max(0, s.written-start)), err
	}
	_, err = s.writeCached(p[n:])
	return int(s.written - start), err
}

// writeCached appends p through the page cache, dropping its pages behind
// the stream.
func (s *File) writeCached(p []byte) (int, error) {
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
	if s.direct != nil && !s.loadTail() {
		s.dropDirect()
	}
	return nil
}

// dropDirect has the stream go on through the cache.
func (s *File) dropDirect() {
	s.direct.Close()
	s.direct, s.pend = nil, nil
}

// Close closes the file; what it holds was written by each Write.
func (s *File) Close() error {
	if s.direct != nil {
		s.direct.Close()
	}
	return s.f.Close()
}

// aligned returns an empty buffer of capacity n whose first byte is
// aligned to blockSize.
func aligned(n int) []byte {
	b := make([]byte, n+blockSize)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (blockSize - 1))
	if off != 0 {
		off = blockSize - off
	}
	return b[off : off : off+n]
}
