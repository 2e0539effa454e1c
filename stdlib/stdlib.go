// Package stdlib embeds the plugs and modules shipped in the binary, which
// configurations reference as blaise:NAME.
package stdlib

import "embed"

// FS holds the standard library's .star files.
//
//go:embed *.star
var FS embed.FS
