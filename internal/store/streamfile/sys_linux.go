package streamfile

import (
	"os"

	"golang.org/x/sys/unix"
)

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
