package deflate

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
)

// TestPackerReusedStreamsInflate: each Pack is one whole stream that
// inflates to its input, the writer and buffer reused between them.
func TestPackerReusedStreamsInflate(t *testing.T) {
	var k Packer
	for _, in := range []string{strings.Repeat(`{"a":1}`+"\n", 1000), "", "one line\n"} {
		packed, err := k.Pack([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(flate.NewReader(bytes.NewReader(packed)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != in {
			t.Fatalf("inflated %q, want %q", got, in)
		}
	}
}
