package acp

import (
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
