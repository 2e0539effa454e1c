package acp

import (
	"errors"
	"io"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIovecs is the most pieces one writev takes (IOV_MAX).
const maxIovecs = 1024

// writev returns a vectorWriter for w when w has a file descriptor, as
// pipes, files and sockets do; otherwise nil. A pipe or socket is written
// with a raw system call first (see rawMode).
func writev(w any) vectorWriter {
	rc := rawConn(w)
	if rc == nil {
		return nil
	}
	raw, polled := rawMode(rc)
	// What a write needs is kept from one write to the next (a Writer
	// writes one batch at a time), so that a write allocates nothing.
	var (
		iov []unix.Iovec
		n   int
		err error
	)
	write := func(fd uintptr) bool {
		var errno unix.Errno
		if raw {
			n, errno = rawCall(unix.SYS_PWRITEV2, fd, unsafe.SliceData(iov), len(iov))
			raw = !refused(errno)
		}
		// Refused, or it would wait on a descriptor the runtime does not
		// poll: the standard call, which waits in the kernel.
		if !raw || errno == unix.EAGAIN && !polled {
			r, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
			n, errno = int(r), e
		}
		err = nil
		if errno != 0 {
			n, err = 0, errno
		}
		// On a descriptor that would block, wait until it can take more.
		return !errors.Is(err, unix.EAGAIN)
	}
	return func(bufs [][]byte) error {
		for len(bufs) > 0 {
			iov = iovecs(iov[:0], bufs[:min(len(bufs), maxIovecs)])
			rerr := rc.Write(write)
			runtime.KeepAlive(bufs)
			switch {
			case rerr != nil:
				return rerr
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				return err
			case n == 0:
				return io.ErrShortWrite
			}
			bufs = advance(bufs, n)
		}
		return nil
	}
}

// iovecs appends to iov the iovecs of bufs.
func iovecs(iov []unix.Iovec, bufs [][]byte) []unix.Iovec {
	for _, b := range bufs {
		v := unix.Iovec{Base: unsafe.SliceData(b)}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	return iov
}

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
