package main

import (
	"os"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugdoc"
)

// DocCmd is `blaise-agent doc`: the reference of plugs.
type DocCmd struct {
	Refs   []string `arg:"" optional:"" help:"Plugs: blaise:NAME, or paths of plug files (default: every plug of the standard library)." predictor:"ref"`
	Format string   `help:"Output format: text, markdown or json." enum:"text,markdown,json" default:"text"`
	JSON   bool     `name:"json" help:"Print the references as JSON (the same as --format json)."`
}

// Run prints the references.
func (c *DocCmd) Run(g *Globals) error {
	refs, err := plugdoc.Load(chain.NewLoader(g.Logger()), c.Refs)
	if err != nil {
		return err
	}
	return plugdoc.Write(os.Stdout, refs, c.Format)
}

// Validate makes --json mean --format json.
func (c *DocCmd) Validate() error { return jsonFormat(c.JSON, &c.Format) }
