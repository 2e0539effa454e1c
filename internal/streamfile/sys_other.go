//go:build !linux

package streamfile

import "os"

// Without direct writes, blocks are only a unit of the buffer's size.
const (
	blockSize   = 4096
	directChunk = 1 << 20
	directMin   = 64 << 10
)

// writeDirect is never called: no file is opened for direct writes.
var writeDirect = (*os.File).WriteAt

// openDirect leaves the stream to the cache: direct writes are Linux's.
func (s *File) openDirect() {}

// refused reports whether err refuses direct writes; there are none here.
func refused(error) bool { return false }

// advise does nothing where the system takes no such advice.
func advise(*os.File, int64, int64) {}
