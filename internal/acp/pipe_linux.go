package acp

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked of the pipes a Reader or Writer uses. A
// busy agent then writes, and the proxy reads, up to a block at a time
// rather than the 64 KiB of a default pipe.
const pipeSize = 1 << 20

// enlargePipe asks for a larger capacity when f is a pipe; for anything
// else it does nothing. A refusal (over /proc/sys/fs/pipe-max-size) keeps
// the pipe as it was.
func enlargePipe(f any) {
	rc := rawConn(f)
	if rc == nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
	})
}

// rawConn returns the descriptor of x, a pipe, file or socket, or nil
// when it has none.
func rawConn(x any) syscall.RawConn {
	sc, ok := x.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
