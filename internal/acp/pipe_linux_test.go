package acp

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A Reader and a Writer on pipes ask for larger pipes, so that a busy
// stream costs fewer system calls.
func TestPipesAreEnlarged(t *testing.T) {
	for _, end := range []string{"reader", "writer"} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if end == "reader" {
			NewReader(r, 0)
		} else {
			NewWriter(w)
		}
		size, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
		if err != nil || size < pipeSize {
			t.Errorf("%s: pipe size %d (%v), want %d", end, size, err, pipeSize)
		}
		r.Close()
		w.Close()
	}
}

// A batch written with writev allocates nothing: the iovecs of the last
// batch are used again (the front end's writes).
func TestWritevAllocatesNothing(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	vec := writev(w)
	bufs := make([][]byte, 300)
	for i := range bufs {
		bufs[i] = []byte("piece\n")
	}
	batch := make([][]byte, len(bufs))
	if allocs := testing.AllocsPerRun(50, func() {
		copy(batch, bufs)
		if err := vec(batch); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a writev of %d pieces allocates %v times", len(bufs), allocs)
	}
}
