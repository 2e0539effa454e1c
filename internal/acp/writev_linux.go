package acp

import (
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// maxIovecs is the most pieces one writev takes (IOV_MAX).
const maxIovecs = 1024

// writev returns a vectorWriter for w when w has a file descriptor, as
// pipes, files and sockets do; otherwise nil.
func writev(w any) vectorWriter {
	rc := rawConn(w)
	if rc == nil {
		return nil
	}
	return func(bufs [][]byte) error {
		for len(bufs) > 0 {
			var (
				n   int
				err error
			)
			rerr := rc.Write(func(fd uintptr) bool {
				n, err = unix.Writev(int(fd), bufs[:min(len(bufs), maxIovecs)])
				// On a descriptor that would block, wait until it can take more.
				return !errors.Is(err, unix.EAGAIN)
			})
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
