package acp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// readNow returns, for r a pipe or socket (see rawMode), two reads with raw
// system calls: now reads what r holds already and never waits; wait reads
// what r holds or, in non-blocking mode, waits through the runtime's
// poller until r holds something. Either returns ok false when it read
// nothing: for now, that nothing has arrived; for wait, that a Read of r
// must wait or say what it meets (the end of the stream, an error, r
// closed, a kernel that refused the raw read). For anything else, nil.
func readNow(r any) (now, wait func(p []byte) (n int, ok bool)) {
	rc := rawConn(r)
	if rc == nil {
		return nil, nil
	}
	raw, polled := rawMode(rc)
	if !raw {
		return nil, nil
	}
	// What a read needs is kept from one read to the next, so that a read
	// allocates nothing.
	var (
		iov     unix.Iovec
		n       int
		waiting bool
	)
	read := func(fd uintptr) bool {
		if raw {
			var errno unix.Errno
			n, errno = rawCall(unix.SYS_PREADV2, fd, &iov, 1)
			if !refused(errno) {
				// Returning false waits until the descriptor can be read.
				return !waiting || !polled || errno != unix.EAGAIN
			}
			raw = false
		}
		// The kernel refused the raw read: the standard one, where it
		// does not wait.
		n = 0
		if polled && !waiting {
			n, _ = unix.Read(int(fd), unsafe.Slice(iov.Base, iov.Len))
		}
		return true
	}
	do := func(p []byte, w bool) (int, bool) {
		if len(p) == 0 || !raw && (w || !polled) {
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
