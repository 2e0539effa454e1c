package lsp

import (
	"strings"
	"unicode/utf8"
)

// Positions come in three units: LSP counts characters of a line in UTF-16
// code units (its default encoding), Starlark in runes, Go strings in bytes.

// byteOfUTF16 returns the byte offset of the n-th UTF-16 unit of line.
func byteOfUTF16(line string, n int) int {
	units := 0
	for i, r := range line {
		if units >= n {
			return i
		}
		units += utf16Len(r)
	}
	return len(line)
}

// utf16OfByte returns the number of UTF-16 units in line[:b].
func utf16OfByte(line string, b int) int {
	units := 0
	for _, r := range line[:min(b, len(line))] {
		units += utf16Len(r)
	}
	return units
}

// byteOfRune returns the byte offset of the n-th rune of line.
func byteOfRune(line string, n int) int {
	for i := range line {
		if n == 0 {
			return i
		}
		n--
	}
	return len(line)
}

func runeOfByte(line string, b int) int { return utf8.RuneCountInString(line[:min(b, len(line))]) }

func utf16Len(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// lineOf returns line n (from 0) of text, or "".
func lineOf(text string, n int) string {
	lines := strings.SplitN(text, "\n", n+2)
	if n < 0 || n >= len(lines) {
		return ""
	}
	return strings.TrimSuffix(lines[n], "\r")
}
