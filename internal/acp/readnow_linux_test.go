package acp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fillNow reads what a pipe holds and returns at once when it holds
// nothing; of a stream without a descriptor, or one whose reads would
// wait, it reads nothing.
func TestFillNowReadsWhatAPipeHoldsWithoutWaiting(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := NewReader(pr, 0)
	if r.now == nil {
		t.Fatal("no read that does not wait for a pipe of os.Pipe")
	}
	if r.fillNow() {
		t.Fatal("fillNow of an empty pipe read something")
	}
	fmt.Fprint(pw, `{"jsonrpc":"2.0","method":"a"}`+"\n")
	if !r.fillNow() {
		t.Fatal("fillNow did not read the line the pipe holds")
	}
	if m, ok, err := r.NextRead(); !ok || err != nil || m.Method != "a" {
		t.Fatalf("NextRead after fillNow: %v %v %v", m, ok, err)
	}

	if NewReader(strings.NewReader("x"), 0).now != nil {
		t.Error("a read that does not wait for a strings.Reader")
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	blocking := os.NewFile(uintptr(fds[0]), "blocking")
	defer blocking.Close()
	defer unix.Close(fds[1])
	if NewReader(blocking, 0).now != nil {
		t.Error("a read that does not wait for a descriptor in blocking mode: it would wait")
	}
}

// A Reader of a pipe in non-blocking mode waits for the lines written
// later (its raw read waits through the runtime's poller), reads them in
// order, then the end of the stream; closed while it waits, it says so.
// So it does where the kernel refuses the raw read (an unknown flag here,
// as an older kernel refuses RWF_NOWAIT on a pipe): with the standard
// calls.
func TestAReaderOfAPollablePipeWaitsForLinesThenTheEnd(t *testing.T) {
	for _, kernel := range []string{"raw", "refused"} {
		t.Run(kernel, func(t *testing.T) {
			if kernel == "refused" {
				refuseRawCalls(t)
			}
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			r := NewReader(pr, 0)
			if r.wait == nil {
				t.Fatal("no raw read for a pipe of os.Pipe")
			}
			go func() {
				for i := range 3 {
					time.Sleep(10 * time.Millisecond)
					fmt.Fprintf(pw, `{"jsonrpc":"2.0","method":"m%d"}`+"\n", i)
				}
				pw.Close()
			}()
			for i := range 3 {
				m, err := r.Next()
				if err != nil || m.Method != fmt.Sprintf("m%d", i) {
					t.Fatalf("line %d: %v, %v", i, m, err)
				}
			}
			if m, err := r.Next(); err != io.EOF {
				t.Fatalf("after the writer closed: %v, %v; want io.EOF", m, err)
			}

			pr2, pw2, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw2.Close()
			r2 := NewReader(pr2, 0)
			got := make(chan error)
			go func() {
				_, err := r2.Next()
				got <- err
			}()
			time.Sleep(20 * time.Millisecond) // the read is waiting, most likely
			pr2.Close()
			if err := <-got; !errors.Is(err, os.ErrClosed) {
				t.Fatalf("closed while waiting: %v; want os.ErrClosed", err)
			}
		})
	}
}

// refuseRawCalls makes the raw calls ask for a flag no kernel knows, which
// the kernel refuses as an older one refuses RWF_NOWAIT on a pipe.
func refuseRawCalls(t *testing.T) {
	old := rwfNowait
	rwfNowait = 1 << 30
	t.Cleanup(func() { rwfNowait = old })
}

// A pipe set blocking after its Writer was made (os.File.Fd does that) and
// full: the Writer's raw write does not wait in the kernel, holding its
// processor, so the rest of the process goes on; a collection, which
// stops every goroutine, ends. (A write that waited there would stop the
// whole test binary at the collection, timers too, until go test's
// -timeout kills it.)
func TestARawWriteNeverWaitsOnADescriptorSetBlockingSince(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	w := NewWriter(pw)
	_ = pw.Fd() // blocking from here on
	written := make(chan error, 1)
	go func() {
		// Four times what the pipe holds: the write must wait for a reader.
		line := NewNotification("n", fmt.Appendf(nil, "%q", strings.Repeat("x", 4<<20)))
		written <- w.WriteMessage(mustParse(line), Now)
	}()
	time.Sleep(50 * time.Millisecond) // the pipe is full, most likely
	gc := make(chan struct{})
	go func() {
		// A signal to the waiting thread may end a write that wrote part
		// of its batch: the next one, which wrote nothing, is the test.
		for range 3 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		close(gc)
	}()
	select {
	case <-gc:
	case <-time.After(10 * time.Second):
		t.Fatal("a collection did not end while the Writer waited for a full pipe: its write holds a processor in the kernel")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	pw.Close()
}
