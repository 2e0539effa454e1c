// Package deflate packs transcript lines as one deflate stream (RFC 1951),
// the form a server keeps them in, with one writer and one buffer reused
// from one batch to the next.
package deflate

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/flate"
)

// level is the compression level of every Packer: speed first, since a
// transcript is deflated while its turn streams, and JSON lines shrink
// several times at it.
const level = flate.BestSpeed

// Packer deflates one batch at a time; its zero value is ready. It is not
// safe for concurrent use.
type Packer struct {
	w   *flate.Writer
	buf bytes.Buffer
}

// Pack returns p deflated as one complete stream. The bytes are the
// Packer's: valid until the next Pack.
func (k *Packer) Pack(p []byte) ([]byte, error) {
	k.buf.Reset()
	if k.w == nil {
		w, err := flate.NewWriter(&k.buf, level)
		if err != nil {
			return nil, fmt.Errorf("deflate: %w", err)
		}
		k.w = w
	} else {
		k.w.Reset(&k.buf)
	}
	if _, err := k.w.Write(p); err != nil {
		return nil, fmt.Errorf("deflate: %w", err)
	}
	if err := k.w.Close(); err != nil {
		return nil, fmt.Errorf("deflate: %w", err)
	}
	return k.buf.Bytes(), nil
}
