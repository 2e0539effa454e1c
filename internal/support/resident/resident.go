// Package resident lets a long-running process give back the pages that
// only its start needed.
package resident

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
)

// Release gives back what the start of the process needed and its life
// does not: the pages of files it mapped (DropStartupPages) and the
// heap's free pages (a collection, then debug.FreeOSMemory). It takes a
// millisecond or two, and the pages touched again are faulted in again:
// call it once the start is over, off the path of a first answer.
func Release() {
	DropStartupPages()
	debug.FreeOSMemory()
}

// DropStartupPages unmaps from this process the pages of files it maps
// read-only (its binary's code, constant data and the runtime's tables,
// and the C library and its loader where they are linked), so that only
// those it touches from now on count again in its resident memory.
// Package initialisation runs code and reads data spread over the whole
// binary, the loader runs the C library's, and the kernel maps each page
// it faults in together with its neighbours (64 KiB): a process that
// serves a protocol afterwards keeps most of those pages mapped, never to
// use them again. The pages stay in the page cache, shared with the other
// processes that map them; one touched again is mapped again at the cost
// of a minor fault.
//
// Writable mappings (the binary's data) are left alone, and so is a
// read-only mapping with pages of its own (Anonymous in smaps): relocated
// data, written at load and made read-only after (GNU_RELRO), which the
// file's pages would not restore. Errors are ignored: this only changes
// what the process holds.
func DropStartupPages() {
	smaps, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer smaps.Close()
	for _, m := range droppable(smaps) {
		// By address: the mapping is no Go memory to make a slice of.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED)
	}
}

// mapping is a range of addresses, end excluded.
type mapping struct{ start, end uint64 }

// droppable returns the mappings of files in smaps (as /proc/PID/smaps has
// them) that are read-only and have no pages of their own: whose pages are
// all the file's.
func droppable(smaps io.Reader) []mapping {
	var out []mapping
	var cur mapping // the read-only mapping of a file being read, if any
	done := func() {
		if cur.end > cur.start {
			out = append(out, cur)
		}
		cur = mapping{}
	}
	s := bufio.NewScanner(smaps)
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) == 0 {
			continue
		}
		if start, end, ok := bytes.Cut(f[0], []byte("-")); ok && len(f) >= 5 {
			// A mapping: start-end perms offset dev inode [path]. Its
			// fields follow, Anonymous among them.
			done()
			if len(f) < 6 || f[5][0] != '/' || bytes.IndexByte(f[1], 'w') >= 0 {
				continue
			}
			a, err1 := strconv.ParseUint(string(start), 16, 64)
			b, err2 := strconv.ParseUint(string(end), 16, 64)
			if err1 == nil && err2 == nil {
				cur = mapping{a, b}
			}
			continue
		}
		if string(f[0]) == "Anonymous:" && len(f) >= 2 && string(f[1]) != "0" {
			cur = mapping{} // pages of its own: keep the mapping whole
		}
	}
	if s.Err() != nil {
		return nil
	}
	done()
	return out
}
