package acp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// readNow returns, for r with a descriptor in non-blocking mode (see
// nonblocking), two reads: now reads what r holds already and never
// waits; wait waits, through the runtime's poller, until r holds
// something and reads it. Either returns ok false when it read nothing:
// for now, that nothing has arrived; for wait, the end of the stream, an
// error, r closed, or a kernel that refused the raw read, all of which a
// Read of r then meets. For anything else, nil.
func readNow(r any) (now, wait func(p []byte) (n int, ok bool)) {
	rc := rawConn(r)
	if rc == nil || !nonblocking(rc) {
		return nil, nil
	}
	// What a read needs is kept from one read to the next, so that a read
	// allocates nothing.
	var (
		iov     unix.Iovec
		n       int
		waiting bool
		plain   bool // the kernel refused the raw read
	)
	read := func(fd uintptr) bool {
		if plain {
			if !waiting {
				n, _ = unix.Read(int(fd), unsafe.Slice(iov.Base, iov.Len))
			}
			return true
		}
		var errno unix.Errno
		n, errno = rawCall(unix.SYS_PREADV2, fd, &iov, 1)
		if refused(errno) {
			plain = true
			return true
		}
		// Returning false waits until the descriptor can be read.
		return !waiting || errno != unix.EAGAIN
	}
	do := func(p []byte, w bool) (int, bool) {
		if len(p) == 0 {
			return 0, false
		}
		iov, waiting = unix.Iovec{Base: unsafe.SliceData(p)}, w
		iov.SetLen(len(p))
		err := rc.Read(read)
		iov = unix.Iovec{}
		if err != nil || n <= 0 {
			return 0, false
		}
		return n, true
	}
	return func(p []byte) (int, bool) { return do(p, false) },
		func(p []byte) (int, bool) { return do(p, true) }
}
