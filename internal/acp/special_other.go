//go:build !amd64

package acp

import (
	"bytes"
	"encoding/binary"
)

// plainTail is plainRun past the first words of a run: the quotes and
// backslashes are found with bytes.IndexByte, which is vectorised, and the
// bytes between them are only checked for control characters. *quote
// remembers the next quote found (-1: look again), so that a string with
// many escapes is still scanned once.
func plainTail(d []byte, i int, quote *int) int {
	if len(d)-i < 8 {
		for i < len(d) && !special[d[i]] {
			i++
		}
		return i
	}
	if *quote < i {
		*quote = len(d)
		if q := bytes.IndexByte(d[i:], '"'); q >= 0 {
			*quote = i + q
		}
	}
	run := d[i:*quote]
	if b := bytes.IndexByte(run, '\\'); b >= 0 {
		run = run[:b]
	}
	return i + control(run)
}

// below20 is not 0 when a byte of x is below 0x20.
func below20(x uint64) uint64 { return (x - lsb*0x20) &^ x & msb }

// control returns the offset of the first byte of b below 0x20, or len(b).
func control(b []byte) int {
	i := 0
	// 32 bytes at a time, then eight, while none is a control character.
	// The words are read from an array, which needs no bounds checks.
	for ; i+32 <= len(b); i += 32 {
		w := (*[32]byte)(b[i : i+32])
		if below20(binary.LittleEndian.Uint64(w[0:8]))|below20(binary.LittleEndian.Uint64(w[8:16]))|
			below20(binary.LittleEndian.Uint64(w[16:24]))|below20(binary.LittleEndian.Uint64(w[24:32])) != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if below20(binary.LittleEndian.Uint64(b[i:])) != 0 {
			break
		}
	}
	for i < len(b) && b[i] >= 0x20 {
		i++
	}
	return i
}
