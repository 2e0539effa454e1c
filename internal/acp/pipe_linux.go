package acp

import (
	"syscall"
	"unsafe"

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

// rawMode tells how the Readers and Writers of rc's descriptor read and
// write it. A pipe or socket (raw) is read and written with raw system
// calls first (rawCall), which never wait: the scheduler is not told of
// them, so no other thread takes over the caller's processor while the
// kernel copies, and the runtime's monitor is not kept waking every 20 µs
// to look for calls that block. When such a call would have had to wait,
// a descriptor in non-blocking mode (polled: one this process made, such
// as os.Pipe's and exec.Cmd's, which the runtime polls) is waited for
// through the runtime's poller; one in blocking mode (inherited, as stdin
// and stdout usually are) with the standard library's call, which waits
// in the kernel. Other files keep the standard calls.
func rawMode(rc syscall.RawConn) (raw, polled bool) {
	_ = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil || unix.Fstat(int(fd), &st) != nil {
			return
		}
		raw = st.Mode&unix.S_IFMT == unix.S_IFIFO || st.Mode&unix.S_IFMT == unix.S_IFSOCK
		polled = flags&unix.O_NONBLOCK != 0
	})
	return raw, polled
}

// rwfNowait is the flag of a raw call; tests set one the kernel refuses.
var rwfNowait uintptr = unix.RWF_NOWAIT

// rawCall reads (SYS_PREADV2) or writes (SYS_PWRITEV2) iov's n pieces at
// fd's position with RWF_NOWAIT, as a raw system call: it never waits, even
// should the descriptor have been set blocking since (os.File.Fd does
// that). A kernel that does not take RWF_NOWAIT on a pipe (an older one)
// refuses it with EOPNOTSUPP or EINVAL (refused): the caller then makes
// the standard calls instead.
func rawCall(trap, fd uintptr, iov *unix.Iovec, n int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(iov)), uintptr(n), ^uintptr(0), 0, rwfNowait)
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// refused tells whether errno is a kernel's refusal of RWF_NOWAIT.
func refused(errno unix.Errno) bool { return errno == unix.EOPNOTSUPP || errno == unix.EINVAL }
