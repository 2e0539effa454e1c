package streamfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident says whether the page at off of path is in the page cache.
func resident(t *testing.T, path string, off int64) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	m, err := unix.Mmap(int(f.Fd()), off/page*page, int(page), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, 1)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal("mincore: ", errno)
	}
	return vec[0]&1 == 1
}

// Issue 12: a transcript written as a fast stream has its pages written
// back and dropped behind it, lag bytes from the end, and keeps every byte
// in order, after what the file held before.
func TestIssue12_StreamPagesAreDroppedBehindIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	if err := os.WriteFile(path, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := New(f)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	var want bytes.Buffer
	want.WriteString("before\n")
	write := func(n int) {
		for i := 0; i < n; i++ {
			chunk[0] = byte('A' + want.Len()%26)
			if _, err := s.Write(chunk); err != nil {
				t.Fatal(err)
			}
			want.Write(chunk)
		}
	}
	write(lag >> 20)
	if !resident(t, path, 0) {
		t.Skipf("the first page of %s is not in the cache after its write: this file system keeps no pages to drop", path)
	}
	// Once the pages are on disk, the next step's advice drops those
	// behind the lag.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write(step >> 20)
	if resident(t, path, 0) {
		t.Errorf("the first page is still in the cache, %d bytes behind the end", want.Len())
	}
	if !resident(t, path, int64(want.Len()-1)) {
		t.Errorf("the last page was dropped: only pages %d bytes behind the end should be", lag)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the file holds %d bytes, not the %d written", len(got), want.Len())
	}
}
