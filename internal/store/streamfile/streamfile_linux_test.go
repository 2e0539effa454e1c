package streamfile

import (
	"bytes"
	"errors"
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

// throughTheCache has the test's files refuse direct writes.
func throughTheCache(t testing.TB) {
	open := openDirectFile
	openDirectFile = func(string) (*os.File, error) { return nil, unix.EINVAL }
	t.Cleanup(func() { openDirectFile = open })
}

// TestStreamThroughTheCacheHasItsPagesDroppedBehindIt: a transcript written
// as a fast stream through the cache (its file system refuses direct writes)
// has its pages written back and dropped behind it, lag bytes from the end,
// and keeps every byte in order, after what the file held before.
func TestStreamThroughTheCacheHasItsPagesDroppedBehindIt(t *testing.T) {
	throughTheCache(t)
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
// where the file system refuses direct writes.
func directStream(t *testing.T, path, before string) *File {
	t.Helper()
	s := openStream(t, path, before)
	if s.direct == nil {
		t.Skipf("the file system of %s refuses direct writes", path)
	}
	return s
}

// TestDirectStreamLeavesNoPageInTheCache: a stream written directly leaves
// none of its pages in the cache, but for its last unfinished block, and
// keeps every byte in order after what the file held before (an unfinished
// block of its own).
func TestDirectStreamLeavesNoPageInTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 64<<10) // 1 MiB
	var want bytes.Buffer
	want.WriteString("before\n")
	for i := 0; i < 16; i++ {
		chunk[0] = byte('A' + i)
		if _, err := s.Write(chunk[:len(chunk)-i]); err != nil {
			t.Fatal(err)
		}
		want.Write(chunk[:len(chunk)-i])
	}
	for off := int64(0); off < int64(want.Len())-blockSize; off += 1 << 20 {
		if resident(t, path, off) {
			t.Errorf("the page at %d of %d bytes is in the cache", off, want.Len())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fileHolds(t, path, want.Bytes())
}

// TestEveryWriteIsInTheFileWhenItReturns: when a Write returns, the file
// holds what it wrote, whatever the sizes of the writes, written directly or
// through the cache; a stream reopened goes on after what the file holds.
func TestEveryWriteIsInTheFileWhenItReturns(t *testing.T) {
	for _, mode := range []string{"direct", "cache"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "cache" {
				throughTheCache(t)
			}
			path := filepath.Join(t.TempDir(), "transcript.jsonl")
			rng := rand.New(rand.NewPCG(12, uint64(len(mode))))
			want := []byte("before\n")
			for open := 0; open < 3; open++ {
				s := openStream(t, path, string(want))
				if (s.direct != nil) != (mode == "direct") {
					if mode == "cache" {
						t.Fatal("a stream whose file refuses direct writes writes directly")
					}
					t.Skipf("the file system of %s refuses direct writes", path)
				}
				for i := 0; i < 40; i++ {
					// Mostly small records, now and then a chunk larger
					// than the direct buffer.
					p := randomWrite(rng, 8, 3*directChunk)
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
		})
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
// cuts what a failed append wrote) goes on from the cut, at any offset,
// aligned or not, on both paths: the file holds what was written before the
// cut, then what came after it.
func TestAStreamCutBackGoesOnFromTheCut(t *testing.T) {
	for _, mode := range []string{"direct", "cache"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "cache" {
				throughTheCache(t)
			}
			path := filepath.Join(t.TempDir(), "transcript.jsonl")
			s := openStream(t, path, "")
			if (s.direct != nil) != (mode == "direct") {
				t.Skipf("the file system of %s does not take %s writes", path, mode)
			}
			defer s.Close()
			rng := rand.New(rand.NewPCG(13, uint64(len(mode))))
			var want []byte
			for i := 0; i < 60; i++ {
				p := randomWrite(rng, 4, 2*directChunk)
				n := len(p)
				if _, err := s.Write(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, p...)
				if rng.IntN(3) == 0 {
					// Back to the end of an earlier write, or into it, or
					// to a block's edge.
					cut := int64(len(want) - n)
					switch rng.IntN(3) {
					case 1:
						cut = rng.Int64N(int64(len(want)) + 1)
					case 2:
						cut = int64(len(want)) &^ (blockSize - 1)
					}
					if err := s.Truncate(cut); err != nil {
						t.Fatal(err)
					}
					want = want[:cut]
				}
				if (s.direct != nil) != (mode == "direct") {
					t.Fatalf("after step %d, the stream writes directly: %v, want %v", i, s.direct != nil, mode == "direct")
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("after step %d, the file's %d bytes are not the %d written since the last cut and before it", i, len(got), len(want))
				}
			}
		})
	}
}

// TestARefusedDirectWriteGoesThroughTheCache: a file system that opens a
// file for direct writes but refuses one has the stream go on through the
// cache, with nothing lost.
func TestARefusedDirectWriteGoesThroughTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	want := []byte("before\n")
	p := bytes.Repeat([]byte("x"), 3*blockSize)
	if _, err := s.Write(p); err != nil {
		t.Fatal(err)
	}
	want = append(want, p...)
	replaceWriteDirect(t, func(*os.File, []byte, int64) (int, error) { return 0, unix.EINVAL })
	p = bytes.Repeat([]byte("y"), directChunk+5)
	if n, err := s.Write(p); err != nil || n != len(p) {
		t.Fatalf("the refused write wrote %d of %d bytes: %v", n, len(p), err)
	}
	want = append(want, p...)
	if s.direct != nil {
		t.Error("the stream still writes directly after a refusal")
	}
	if _, err := s.Write([]byte("z\n")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "z\n"...)
	fileHolds(t, path, want)
}

// TestAFailedDirectWriteIsReported: a direct write that fails for another
// reason fails the Write, which tells how much of it the file holds.
func TestAFailedDirectWriteIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "")
	replaceWriteDirect(t, func(*os.File, []byte, int64) (int, error) { return 0, unix.ENOSPC })
	n, err := s.Write(bytes.Repeat([]byte("x"), 2*directChunk))
	if !errors.Is(err, unix.ENOSPC) || n != 0 {
		t.Fatalf("wrote %d bytes, err %v; want 0 and ENOSPC", n, err)
	}
}

// BenchmarkStreamFile measures the CPU time of a stream of 1 MiB writes,
// directly and through the cache (its pages dropped behind it), as
// cpu-ns/MiB of this process (user and system).
func BenchmarkStreamFile(b *testing.B) {
	for _, mode := range []string{"direct", "cache"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "cache" {
				throughTheCache(b)
			}
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "t.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			s := New(f)
			defer s.Close()
			if (s.direct != nil) != (mode == "direct") {
				b.Skip("this file system refuses direct writes")
			}
			chunk := bytes.Repeat([]byte("0123456789abcde\n"), 64<<10)
			b.SetBytes(int64(len(chunk)))
			cpu0 := testsupport.ProcessCPU(b)
			for b.Loop() {
				if _, err := s.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testsupport.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/MiB")
		})
	}
}

// replaceWriteDirect has the test's direct writes go through w.
func replaceWriteDirect(t *testing.T, w func(*os.File, []byte, int64) (int, error)) {
	write := writeDirect
	writeDirect = w
	t.Cleanup(func() { writeDirect = write })
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

// TestSmallWritesGoThroughTheCache: the small writes of a stream (the
// records of requests, on their way) go through the cache and never wait for
// the device; a large one is written directly, with the blocks the small
// ones left.
func TestSmallWritesGoThroughTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	direct := 0
	replaceWriteDirect(t, func(f *os.File, p []byte, off int64) (int, error) {
		direct++
		return f.WriteAt(p, off)
	})
	want := []byte("before\n")
	record := bytes.Repeat([]byte("r"), 999)
	for i := 0; i < 200; i++ {
		if _, err := s.Write(record); err != nil {
			t.Fatal(err)
		}
		want = append(want, record...)
	}
	if direct != 0 {
		t.Fatalf("%d direct writes for records of %d bytes", direct, len(record))
	}
	fileHolds(t, path, want)
	chunk := bytes.Repeat([]byte("c"), directChunk)
	if _, err := s.Write(chunk); err != nil {
		t.Fatal(err)
	}
	want = append(want, chunk...)
	if direct == 0 {
		t.Fatal("a chunk of 1 MiB was not written directly")
	}
	fileHolds(t, path, want)
}

// TestAFileNotOpenedForAppendingIsWrittenThroughTheCache: a file not opened
// for appending is written through the cache, where its writes go: the
// direct writes would not move its offset, and the cache's would land over
// the start of the file.
func TestAFileNotOpenedForAppendingIsWrittenThroughTheCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := New(f)
	defer s.Close()
	if s.direct != nil {
		t.Fatal("a file not opened for appending is written directly")
	}
	var want []byte
	for _, n := range []int{5000, directChunk + 3, 10} {
		p := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		if _, err := s.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	fileHolds(t, path, want)
}

// TestADirectWriteCutShortThenRefusedWritesEachByteOnce: a direct write cut
// short, then refused, leaves the file with each byte once: what went out is
// kept account of.
func TestADirectWriteCutShortThenRefusedWritesEachByteOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	replaceWriteDirect(t, func(f *os.File, p []byte, off int64) (int, error) {
		n, err := f.WriteAt(p[:blockSize], off)
		if err != nil {
			return n, err
		}
		return n, unix.EINVAL
	})
	p := bytes.Repeat([]byte("x"), 3*directMin)
	if n, err := s.Write(p); err != nil || n != len(p) {
		t.Fatalf("wrote %d of %d bytes: %v", n, len(p), err)
	}
	fileHolds(t, path, append([]byte("before\n"), p...))
}

// TestADirectWriteCutShortTellsWhatTheFileHolds: a direct write cut short by
// a failure tells how much of the Write the file holds.
func TestADirectWriteCutShortTellsWhatTheFileHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	replaceWriteDirect(t, func(f *os.File, p []byte, off int64) (int, error) {
		n, err := f.WriteAt(p[:2*blockSize], off)
		if err != nil {
			return n, err
		}
		return n, unix.ENOSPC
	})
	p := bytes.Repeat([]byte("x"), 3*directMin)
	n, err := s.Write(p)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("err %v, want ENOSPC", err)
	}
	// The first two blocks went out: "before\n" and the first bytes of p.
	if want := 2*blockSize - len("before\n"); n != want {
		t.Fatalf("the Write says %d bytes are in the file, want %d", n, want)
	}
	fileHolds(t, path, append([]byte("before\n"), p[:n]...))
}

// TestWhatIsAppendedToTheLentBufferIsInTheFile: what is appended to the
// buffer a File lends goes to the file from there, not copied once more,
// among writes of every size; a write that outgrew the room lent is written
// as any other.
func TestWhatIsAppendedToTheLentBufferIsInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := directStream(t, path, "before\n")
	want := []byte("before\n")
	rng := rand.New(rand.NewPCG(12, 1))
	lent := 0
	for i := 0; i < 60; i++ {
		if rng.IntN(2) == 0 {
			p := randomWrite(rng, 4, 2*directChunk)
			if _, err := s.Write(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p...)
		} else {
			b := s.AppendBuffer(directChunk)
			if b == nil || len(b) != 0 || cap(b) < directChunk {
				t.Fatalf("step %d: lent %d bytes of room, want %d", i, cap(b), directChunk)
			}
			room := &b[:1][0]
			// Mostly within the room; now and then past it.
			b = append(b, randomWrite(rng, 6, directChunk+5*blockSize)...)
			if len(b) > 0 && &b[0] == room {
				lent++
			}
			// Once written, the room is the File's again.
			want = append(want, b...)
			if n, err := s.WriteAppended(b); err != nil || n != len(b) {
				t.Fatalf("step %d: wrote %d of %d bytes appended: %v", i, n, len(b), err)
			}
		}
		fileHolds(t, path, want)
	}
	if lent == 0 {
		t.Fatal("no write went out from the lent buffer")
	}
}

// TestAStreamThroughTheCacheLendsNoBuffer: a stream through the cache lends
// no buffer.
func TestAStreamThroughTheCacheLendsNoBuffer(t *testing.T) {
	throughTheCache(t)
	s := openStream(t, filepath.Join(t.TempDir(), "transcript.jsonl"), "")
	if b := s.AppendBuffer(directChunk); b != nil {
		t.Fatalf("lent %d bytes of room", cap(b))
	}
}
