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
// nothing, whether the pipe is in non-blocking mode (os.Pipe's, polled by
// the runtime) or blocking (inherited, as stdin usually is: the raw read
// never waits); of a stream without a descriptor it reads nothing. Where
// the kernel refuses the raw read, a blocking pipe is not read ahead.
func TestFillNowReadsWhatAPipeHoldsWithoutWaiting(t *testing.T) {
	for _, mode := range []string{"pollable", "blocking", "pollable-refused", "blocking-refused"} {
		t.Run(mode, func(t *testing.T) {
			if strings.HasSuffix(mode, "-refused") {
				refuseRawCalls(t)
			}
			pr, pw := pipeIn(t, strings.HasPrefix(mode, "pollable"))
			r := NewReader(pr, 0)
			if mode == "blocking-refused" {
				if r.fillNow() {
					t.Fatal("fillNow of a blocking pipe read something with the raw read refused")
				}
				return
			}
			if r.now == nil {
				t.Fatal("no read that does not wait for a pipe")
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
		})
	}
	if NewReader(strings.NewReader("x"), 0).now != nil {
		t.Error("a read that does not wait for a strings.Reader")
	}
}

// pipeIn returns a pipe, in non-blocking mode as os.Pipe makes it (the
// runtime polls it) or in blocking mode as a process inherits one, closed
// at the test's end.
func pipeIn(t *testing.T, pollable bool) (pr, pw *os.File) {
	t.Helper()
	if pollable {
		var err error
		if pr, pw, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		pr, pw = os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	return pr, pw
}

// A Reader of a pipe waits for the lines written later, reads them in
// order, then the end of the stream: in non-blocking mode its raw read
// waits through the runtime's poller, and closed while it waits, it says
// so; in blocking mode the standard read waits in the kernel. So it does
// where the kernel refuses the raw read (an unknown flag here, as an older
// kernel refuses RWF_NOWAIT on a pipe), with the standard calls.
func TestAReaderOfAPipeWaitsForLinesThenTheEnd(t *testing.T) {
	for _, mode := range []string{"pollable", "blocking", "pollable-refused", "blocking-refused"} {
		t.Run(mode, func(t *testing.T) {
			if strings.HasSuffix(mode, "-refused") {
				refuseRawCalls(t)
			}
			pollable := strings.HasPrefix(mode, "pollable")
			pr, pw := pipeIn(t, pollable)
			r := NewReader(pr, 0)
			if r.wait == nil {
				t.Fatal("no raw read for a pipe")
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
			if !pollable {
				return // closing a file does not end a read that waits in the kernel
			}
			pr2, _ := pipeIn(t, true)
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
