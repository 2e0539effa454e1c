package resident

import (
	"bufio"
	"bytes"
	"os"
	_ "os/user" // a build with cgo links the C library, whose pages the drop gives back too
	"slices"
	"strconv"
	"strings"
	"testing"
)

// written lives in the binary's writable data, which the drop leaves alone.
var written = []byte("before")

// TestDropStartupPagesUnmapsTheBinarysReadOnlyPagesAndKeepsItsData: after
// the drop, fewer pages of the binary's read-only mappings are resident
// than before (the test binary's start touched many), and the process goes
// on with its data as it was.
func TestDropStartupPagesUnmapsTheBinarysReadOnlyPagesAndKeepsItsData(t *testing.T) {
	copy(written, "after!")
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	isExe := func(path string) bool { return path == exe }
	isLibc := func(path string) bool { return strings.Contains(path, "/libc.so") }
	before, libcBefore := readOnlyResidentKiB(t, isExe), readOnlyResidentKiB(t, isLibc)
	DropStartupPages()
	after, libcAfter := readOnlyResidentKiB(t, isExe), readOnlyResidentKiB(t, isLibc)
	if before == 0 || after >= before {
		t.Fatalf("resident read-only pages of the binary: %d KiB before the drop, %d KiB after", before, after)
	}
	// A build with cgo maps the C library, which the loader's work left resident.
	if libcBefore > 0 && libcAfter >= libcBefore {
		t.Fatalf("resident read-only pages of the C library: %d KiB before the drop, %d KiB after", libcBefore, libcAfter)
	}
	if string(written) != "after!" {
		t.Fatalf("the binary's data after the drop: %q, want %q", written, "after!")
	}
	Release()
	if string(written) != "after!" {
		t.Fatalf("the binary's data after Release: %q", written)
	}
}

// readOnlyResidentKiB sums Rss over the mappings without write permission
// of the files whose path is, from /proc/self/smaps.
func readOnlyResidentKiB(t *testing.T, is func(path string) bool) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps: ", err)
	}
	defer f.Close()
	total, counting := 0, false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := bytes.Fields(s.Bytes())
		switch {
		case len(fields) >= 5 && bytes.IndexByte(fields[0], '-') > 0:
			counting = len(fields) >= 6 && is(string(fields[5])) && bytes.IndexByte(fields[1], 'w') < 0
		case counting && len(fields) == 3 && string(fields[0]) == "Rss:":
			kib, _ := strconv.Atoi(string(fields[1]))
			total += kib
		}
	}
	return total
}

// TestDropStartupPagesLeavesRelocatedReadOnlyDataAndTheKernelsPages: a position-independent
// binary's relocated data is mapped read-only after the loader wrote it
// (GNU_RELRO): its pages are the process's own (Anonymous), and dropping
// them would bring back the file's, unrelocated. Only the read-only
// mappings of files whose pages are all the file's are dropped: the
// binary's and the C library's, not the anonymous ones.
func TestDropStartupPagesLeavesRelocatedReadOnlyDataAndTheKernelsPages(t *testing.T) {
	smaps := `557e61f3b000-557e62ae5000 r-xp 00000000 fe:00 10313759                   /usr/bin/blaise-agent
Size:              11944 kB
Rss:                1920 kB
Anonymous:             0 kB
557e62ae5000-557e63727000 r--p 00baa000 fe:00 10313759                   /usr/bin/blaise-agent
Rss:                4936 kB
Anonymous:             0 kB
557e63727000-557e639af000 r--p 017ec000 fe:00 10313759                   /usr/bin/blaise-agent
Rss:                2216 kB
Anonymous:          2216 kB
557e639af000-557e63abd000 rw-p 01a74000 fe:00 10313759                   /usr/bin/blaise-agent
Anonymous:           292 kB
7f8e6f070000-7f8e6f1f0000 r-xp 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f8e6f1f0000-7f8e6f200000 rw-p 00000000 00:00 0 
Anonymous:            64 kB
7ffd5a3f8000-7ffd5a3fa000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
`
	got := droppable(strings.NewReader(smaps))
	want := []mapping{{0x557e61f3b000, 0x557e62ae5000}, {0x557e62ae5000, 0x557e63727000}, {0x7f8e6f070000, 0x7f8e6f1f0000}}
	if !slices.Equal(got, want) {
		t.Fatalf("droppable: %x, want %x (the code, the constant data and libc's code, not the relocated data, the data or the heap)", got, want)
	}
}
