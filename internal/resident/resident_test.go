package resident

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
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
	before := readOnlyResidentKiB(t)
	DropStartupPages()
	after := readOnlyResidentKiB(t)
	if after >= before {
		t.Fatalf("resident read-only pages of the binary: %d KiB before the drop, %d KiB after", before, after)
	}
	if string(written) != "after!" {
		t.Fatalf("the binary's data after the drop: %q, want %q", written, "after!")
	}
	Release()
	if string(written) != "after!" {
		t.Fatalf("the binary's data after Release: %q", written)
	}
}

// readOnlyResidentKiB sums Rss over the mappings of this binary without
// write permission, from /proc/self/smaps.
func readOnlyResidentKiB(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
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
		case len(fields) >= 6 && bytes.IndexByte(fields[0], '-') > 0:
			counting = string(fields[5]) == exe && bytes.IndexByte(fields[1], 'w') < 0
		case counting && len(fields) == 3 && string(fields[0]) == "Rss:":
			kib, _ := strconv.Atoi(string(fields[1]))
			total += kib
		}
	}
	if total == 0 {
		t.Fatal("no resident read-only mapping of the binary")
	}
	return total
}
