package main

import (
	"os"

	"github.com/blaiseagent/blaise-agent/internal/plugs/starfmt"
)

// FmtCmd is `blaise-agent fmt`: formats .star files in place.
type FmtCmd struct {
	Paths []string `arg:"" optional:"" help:"Files, or directories searched recursively for .star files (default: .)."`
	Check bool     `help:"Change nothing: list the files that would change, and exit 1 if there are any."`
}

// Run formats the files.
func (c *FmtCmd) Run(g *Globals) error {
	return starfmt.Run(c.Paths, c.Check, os.Stdout)
}
