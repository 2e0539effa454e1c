package acp

import (
	"fmt"
	"os"
	"strings"
	"testing"

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
