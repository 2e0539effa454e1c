package apiclient

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

// TestBridgeGivesTheClientWholeLinesOnly: acp --server passes the
// editor whole messages; the part of one that a broken connection cut is
// dropped, not passed on to break the client's parser.
func TestBridgeGivesTheClientWholeLinesOnly(t *testing.T) {
	server, conn := net.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	stdin, editor := io.Pipe()
	defer editor.Close() // the bridge's copy from stdin ends
	go func() { done <- Bridge(t.Context(), conn, stdin, &out) }()
	for _, part := range []string{`{"a":`, `1}` + "\n" + `{"b":2}` + "\n" + `{"c":`} {
		if _, err := io.WriteString(server, part); err != nil {
			t.Fatal(err)
		}
	}
	server.Close() // the connection breaks inside the third message
	if err := <-done; err != nil {
		t.Fatalf("bridge: %v", err)
	}
	if got := out.String(); got != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("the client got %q", got)
	}
	if strings.Contains(out.String(), `"c"`) {
		t.Fatal("a cut message reached the client")
	}
}
