package acp

import (
	"errors"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxIovecs is the most pieces one writev takes (IOV_MAX).
const maxIovecs = 1024

// writev returns a vectorWriter for w when w has a file descriptor, as
// pipes, files and sockets do; otherwise nil.
func writev(w any) vectorWriter {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(bufs [][]byte) error {
		for len(bufs) > 0 {
			var n int
			var werr error
			err := rc.Write(func(fd uintptr) bool {
				n, werr = unix.Writev(int(fd), bufs[:min(len(bufs), maxIovecs)])
				// On a descriptor that would block, wait until it can
				// take more.
				return !errors.Is(werr, unix.EAGAIN)
			})
			switch {
			case err != nil:
				return err
			case errors.Is(werr, unix.EINTR):
				continue
			case werr != nil:
				return werr
			case n == 0:
				return io.ErrShortWrite
			}
			bufs = advance(bufs, n)
		}
		return nil
	}
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
