package runstore

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// userTimeout bounds how long a store connection's data may go
// unacknowledged before the connection fails: a path that died with data
// in flight is found in 30 s, not in the quarter of an hour of TCP's
// retransmissions.
func userTimeout(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 30_000)
	}); cerr != nil {
		return cerr
	}
	return err
}
