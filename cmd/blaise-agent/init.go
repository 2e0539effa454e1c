package main

import (
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/plugs/scaffold"
)

// InitCmd is `blaise-agent init`: a new project's first files.
type InitCmd struct {
	Dir string `arg:"" optional:"" default:"." help:"Where to write them (created if missing)." type:"path"`
}

// Run writes the files and names them.
func (c *InitCmd) Run(g *Globals) error {
	files, err := scaffold.Init(c.Dir)
	for _, f := range files {
		fmt.Println("wrote", f)
	}
	return err
}
