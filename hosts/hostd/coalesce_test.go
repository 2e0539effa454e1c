package hostd

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

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

func TestCoalescingWriterKeepsOrderAndGathersSmallWrites(t *testing.T) {
	w := &slowWriter{}
	c := newCoalescingWriter(w)
	var want bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	writes := 0
	for i := range 2000 {
		n := rng.IntN(200)
		if i%100 == 0 {
			n = directWrite + rng.IntN(100<<10) // large: written directly, in turn
		}
		p := bytes.Repeat([]byte{byte(i)}, n)
		want.Write(p)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		done := w.b.Len() == want.Len()
		calls := w.calls
		w.mu.Unlock()
		if done {
			if !bytes.Equal(w.b.Bytes(), want.Bytes()) {
				t.Fatal("the bytes arrived out of order")
			}
			if calls >= writes {
				t.Fatalf("%d writes reached the writer in %d calls: nothing was gathered", writes, calls)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes written", w.b.Len(), want.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCoalescingWriterReportsTheWritersError(t *testing.T) {
	boom := errors.New("broken pipe")
	w := &slowWriter{fail: boom}
	c := newCoalescingWriter(w)
	c.Write([]byte("x"))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte("y")); errors.Is(err, boom) {
			if _, err := c.Write(make([]byte, directWrite)); !errors.Is(err, boom) {
				t.Fatalf("large write after the failure: %v", err)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the writer's error was not reported")
}
