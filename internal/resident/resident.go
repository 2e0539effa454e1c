// Package resident lets a long-running process give back the pages that
// only its start needed.
package resident

import (
	"bufio"
	"bytes"
	"os"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
)

// Release gives back what the start of the process needed and its life
// does not: the pages of the binary it mapped (DropStartupPages) and the
// heap's free pages (a collection, then debug.FreeOSMemory). It takes a
// millisecond or two, and the pages touched again are faulted in again:
// call it once the start is over, off the path of a first answer.
func Release() {
	DropStartupPages()
	debug.FreeOSMemory()
}

// DropStartupPages unmaps from this process the pages of its own binary
// that are mapped read-only (code, constant data, the runtime's tables),
// so that only those it touches from now on count again in its resident
// memory. Package initialisation runs code and reads data spread over the
// whole binary, and the kernel maps each page it faults in together with
// its neighbours (64 KiB): a process that serves a protocol afterwards
// keeps most of those pages mapped, never to use them again. The pages
// stay in the page cache, shared with the other processes of the binary;
// one touched again is mapped again at the cost of a minor fault. Writable
// mappings (the binary's data) are left alone. Errors are ignored: this
// only changes what the process holds.
func DropStartupPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer maps.Close()
	s := bufio.NewScanner(maps)
	for s.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(s.Bytes())
		if len(f) < 6 || string(f[5]) != exe || bytes.IndexByte(f[1], 'w') >= 0 {
			continue
		}
		start, end, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(string(start), 16, 64)
		hi, err2 := strconv.ParseUint(string(end), 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		// By address: the mapping is no Go memory to make a slice of.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_DONTNEED)
	}
}
