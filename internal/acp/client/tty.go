package client

import (
	"os"

	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"
)

// ColorMode says when output is styled: the --color flag.
type ColorMode string

// The values of --color.
const (
	ColorAuto   ColorMode = "auto"   // when the output is a terminal that takes styles
	ColorAlways ColorMode = "always" // also into pipes and files
	ColorNever  ColorMode = "never"
)

// Styled reports whether output to f is styled under mode. NO_COLOR (set
// and not empty) and TERM=dumb turn auto off, whatever f is.
func (mode ColorMode) Styled(f *os.File) bool {
	switch mode {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	return os.Getenv("NO_COLOR") == "" && Capable(f)
}

// Capable reports whether f is a terminal that can move its cursor: not a
// pipe or a file, and not TERM=dumb. Spinners, line editing and rendered
// Markdown need one.
func Capable(f *os.File) bool {
	return f != nil && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
}

// Columns returns the width of the terminal f, or 0 when it has none.
func Columns(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
