package coalesce

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// hostdOptions are those of hostd's pipes: large writes go directly.
var hostdOptions = Options{Limit: 256 << 10, Direct: 32 << 10, Closed: io.ErrClosedPipe}

// slowWriter records what it is given, a little at a time.
type slowWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	calls int
	fail  error
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Microsecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.fail != nil {
		return 0, w.fail
	}
	return w.b.Write(p)
}

func TestWriterKeepsOrderAndGathersSmallWrites(t *testing.T) {
	w := &slowWriter{}
	c := New(w, hostdOptions)
	var want bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	writes := 0
	for i := range 2000 {
		n := rng.IntN(200)
		if i%100 == 0 {
			n = hostdOptions.Direct + rng.IntN(100<<10) // large: written directly, in turn
		}
		p := bytes.Repeat([]byte{byte(i)}, n)
		want.Write(p)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	c.Close() // returns once what is queued has been written
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() != want.Len() {
		t.Fatalf("%d of %d bytes written when Close returned", w.b.Len(), want.Len())
	}
	if !bytes.Equal(w.b.Bytes(), want.Bytes()) {
		t.Fatal("the bytes arrived out of order")
	}
	if w.calls >= writes {
		t.Fatalf("%d writes reached the writer in %d calls: nothing was gathered", writes, w.calls)
	}
}

func TestWriterCloseReturnsAfterTheWritersError(t *testing.T) {
	boom := errors.New("broken pipe")
	w := &slowWriter{fail: boom}
	c := New(w, hostdOptions)
	for range 100 {
		c.Write([]byte("x"))
	}
	c.Close()
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned before the flusher stopped")
	}
	if _, err := c.Write([]byte("y")); !errors.Is(err, boom) {
		t.Fatalf("write after a failure and Close: %v", err)
	}
}

func TestWriterReportsTheWritersError(t *testing.T) {
	boom := errors.New("broken pipe")
	w := &slowWriter{fail: boom}
	c := New(w, hostdOptions)
	c.Write([]byte("x"))
	testsupport.Eventually(t, "the writer's error to be reported", func() bool {
		_, err := c.Write([]byte("y"))
		return errors.Is(err, boom)
	})
	if _, err := c.Write(make([]byte, hostdOptions.Direct)); !errors.Is(err, boom) {
		t.Fatalf("large write after the failure: %v", err)
	}
}
