package apiclient

import (
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// acp --server's stdout, a pipe, is as large as local acp's (acp.Writer
// asks for 1 MiB), so that a burst of updates reaches the editor in a few
// writes, as it does from local acp.
func TestBridgeAsksForTheStdoutPipeLocalACPHas(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	server, conn := net.Pipe()
	stdin, editor := io.Pipe()
	defer editor.Close()
	done := make(chan error, 1)
	go func() { done <- Bridge(t.Context(), conn, stdin, w) }()
	if _, err := io.WriteString(server, "{\"a\":1}\n"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 8)
	if _, err := io.ReadFull(r, line); err != nil || string(line) != "{\"a\":1}\n" {
		t.Fatalf("read %q (%v)", line, err)
	}
	server.Close()
	if err := <-done; err != nil {
		t.Fatalf("bridge: %v", err)
	}
	w.Close()
	size, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || size < 1<<20 {
		t.Errorf("the pipe holds %d bytes (%v), want 1 MiB; it held %d", size, err, before)
	}
}
