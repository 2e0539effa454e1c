package acp

import (
	"golang.org/x/sys/unix"
)

// readNow returns, for r with a descriptor in non-blocking mode (a pipe or
// socket of this process's, which the Go runtime polls), a read of what
// it holds already that never waits: ok false when nothing has arrived, or
// when the read failed (the next read that waits meets the failure). For
// anything else, nil.
func readNow(r any) func(p []byte) (n int, ok bool) {
	rc := rawConn(r)
	if rc == nil {
		return nil
	}
	nonblocking := false
	_ = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking = err == nil && flags&unix.O_NONBLOCK != 0
	})
	if !nonblocking {
		// A read would wait: an inherited descriptor the runtime does
		// not poll.
		return nil
	}
	// What a read needs is kept from one read to the next, so that a read
	// allocates nothing.
	var (
		buf []byte
		n   int
	)
	read := func(fd uintptr) bool {
		n, _ = unix.Read(int(fd), buf)
		return true
	}
	return func(p []byte) (int, bool) {
		buf = p
		err := rc.Read(read)
		buf = nil
		if err != nil || n <= 0 {
			return 0, false
		}
		return n, true
	}
}
