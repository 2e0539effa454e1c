package streamfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDirectFile opens name for direct reads and writes; tests replace it.
var openDirectFile = func(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|unix.O_DIRECT, 0)
}

// openDirect opens the file a second time for direct writes, and reads
// its unfinished last block into pend, to be written again whole. Where
// that fails, the stream goes through the cache.
func (s *File) openDirect() {
	// The cache's writes go at the end of f, where direct writes do not
	// move f's offset: only a file opened for appending has them there.
	if flags, err := fcntlFlags(s.f); err != nil || flags&unix.O_APPEND == 0 {
		return
	}
	d, err := openDirectFile(s.f.Name())
	if err != nil {
		return
	}
	// The same file, not one renamed into its place since.
	a, err1 := s.f.Stat()
	b, err2 := d.Stat()
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		d.Close()
		return
	}
	s.direct = d
	if !s.loadTail() {
		s.dropDirect()
	}
}

// loadTail reads the file's unfinished last block into pend, to be
// written again whole; false if it cannot.
func (s *File) loadTail() bool {
	buf := s.pend[:0]
	if cap(buf) < blockSize {
		buf = aligned(blockSize)
	}
	base := s.written &^ (blockSize - 1)
	// One read of one block: a direct read must start aligned.
	n, err := unix.Pread(int(s.direct.Fd()), buf[:blockSize], base)
	if err != nil || int64(n) != s.written-base {
		return false
	}
	s.pend, s.base = buf[:n], base
	return true
}

// fcntlFlags returns the file status flags of f.
func fcntlFlags(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		return 0, err
	}
	return flags, ferr
}

// refused reports whether err is a file system's refusal of a direct
// write, rather than a failure of the write.
func refused(err error) bool { return errors.Is(err, unix.EINVAL) }

// advise starts the writeback of [from, to) without waiting for it, and
// drops the clean pages of the two lags before to-lag: those the last
// call found still dirty get a second chance, and the file's older pages,
// dropped already, are not walked again. Neither changes what the file
// holds, so their errors are of no consequence and are not reported.
func advise(f *os.File, from, to int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), from, to-from, unix.SYNC_FILE_RANGE_WRITE)
		if end := to - lag; end > 0 {
			start := max(0, end-2*lag)
			_ = unix.Fadvise(int(fd), start, end-start, unix.FADV_DONTNEED)
		}
	})
}
