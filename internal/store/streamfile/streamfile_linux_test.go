package streamfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
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

// TestStreamThroughTheCacheHasItsPagesDroppedBehindIt: a transcript written
// as a fast stream has its pages written back and dropped behind it, lag
// bytes from the end, and keeps every byte in order, after what the file
// held before.
func TestStreamThroughTheCacheHasItsPagesDroppedBehindIt(t *testing.T) {
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
	fileHolds(t, path, want.Bytes())
}

// openStream creates path with before in it and returns a File appending
// to it.
func openStream(t *testing.T, path, before string) *File {
	t.Helper()
	if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := New(f)
	t.Cleanup(func() { s.Close() })
	return s
}

// directStream is openStream of a file written directly; the test skips
// TestDirectStreamLeavesNoPageInTheCache: a stream written directly leaves
// none of its pages in the cache, but for its last unfinished block, and
// keeps every byte in order after what the file held before (an unfinished
// TestEveryWriteIsInTheFileWhenItReturns: when a Write returns, the file
// holds what it wrote, whatever the sizes of the writes; a stream reopened
// goes on after what the file holds.
func TestEveryWriteIsInTheFileWhenItReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	rng := rand.New(rand.NewPCG(12, 5))
	want := []byte("before\n")
	for open := 0; open < 3; open++ {
		s := openStream(t, path, string(want))
		for i := 0; i < 40; i++ {
			// Mostly small records, now and then a large chunk.
			p := randomWrite(rng, 8, 3<<20)
			if m, err := s.Write(p); err != nil || m != len(p) {
				t.Fatalf("write %d: %d of %d bytes: %v", i, m, len(p), err)
			}
			want = append(want, p...)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("after write %d of %d bytes, the file holds %d bytes, not the %d written", i, len(p), len(got), len(want))
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// randomWrite is a write of random letters: a record's size (under 600
// bytes), or one time in oneIn a chunk of up to max bytes.
func randomWrite(rng *rand.Rand, oneIn, max int) []byte {
	n := rng.IntN(600)
	if rng.IntN(oneIn) == 0 {
		n = rng.IntN(max)
	}
	p := make([]byte, n)
	for j := range p {
		p[j] = byte('a' + rng.IntN(26))
	}
	return p
}

// TestAStreamCutBackGoesOnFromTheCut: a stream cut back (a server's store
// cuts what a failed append wrote) goes on from the cut, at any offset: the
// file holds what was written before the cut, then what came after it.
func TestAStreamCutBackGoesOnFromTheCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := openStream(t, path, "")
	rng := rand.New(rand.NewPCG(13, 5))
	var want []byte
	for i := 0; i < 60; i++ {
		p := randomWrite(rng, 4, 2<<20)
		n := len(p)
		if _, err := s.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
		if rng.IntN(3) == 0 {
			// Back to the end of an earlier write, or into it, or to a
			// page's edge.
			cut := int64(len(want) - n)
			switch rng.IntN(3) {
			case 1:
				cut = rng.Int64N(int64(len(want)) + 1)
			case 2:
				cut = int64(len(want)) &^ 4095
			}
			if err := s.Truncate(cut); err != nil {
				t.Fatal(err)
			}
			want = want[:cut]
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("after step %d, the file's %d bytes are not the %d written since the last cut and before it", i, len(got), len(want))
		}
	}
}

// BenchmarkStreamFile measures the CPU time of a stream of 1 MiB writes
// (its pages dropped behind it), as cpu-ns/MiB of this process (user and
// system).
func BenchmarkStreamFile(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "t.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	s := New(f)
	defer s.Close()
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 64<<10)
	b.SetBytes(int64(len(chunk)))
	cpu0 := testsupport.ProcessCPU(b)
	for b.Loop() {
		if _, err := s.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testsupport.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/MiB")
}

// fileHolds fails unless path holds want.
func fileHolds(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes, not the %d written", len(got), len(want))
	}
}
