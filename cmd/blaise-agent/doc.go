package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugdoc"
	"github.com/blaiseagent/blaise-agent/interp"
)

// DocCmd is `blaise-agent doc`: the reference of plugs.
type DocCmd struct {
	Refs   []string `arg:"" optional:"" help:"Plugs: blaise:NAME, or paths of plug files, or of a configuration for the plugs it uses (default: every plug of the standard library)." predictor:"ref"`
	Format string   `help:"Output format: text, markdown or json." enum:"text,markdown,json" default:"text"`
	JSON   bool     `name:"json" help:"Print the references as JSON (the same as --format json)."`
}

// Run prints the references, in the order of the refs: a configuration's
// are those of the plugs it uses.
func (c *DocCmd) Run(g *Globals) error {
	l := chain.NewLoader(g.Logger())
	if len(c.Refs) == 0 {
		refs, err := plugdoc.Load(l, nil)
		if err != nil {
			return err
		}
		return plugdoc.Write(os.Stdout, refs, c.Format)
	}
	var out []*plugdoc.Reference
	for _, ref := range c.Refs {
		refs, isConfig, err := configPlugs(g, ref)
		if !isConfig {
			refs, err = plugdoc.Load(l, []string{ref})
		}
		if err != nil {
			return err
		}
		out = append(out, refs...)
	}
	return plugdoc.Write(os.Stdout, out, c.Format)
}

// configPlugs returns the references of the plugs that the configuration
// at ref uses, each once, when ref is one: a file that loads as a
// configuration, or any file named blaise.star, whose error it returns.
func configPlugs(g *Globals, ref string) ([]*plugdoc.Reference, bool, error) {
	if strings.HasPrefix(ref, interp.StdlibPrefix) {
		return nil, false, nil
	}
	// A loader of its own: one keeps what failed to load as it failed.
	cfg, err := chain.NewLoader(g.Logger()).LoadConfig(ref)
	if err != nil {
		return nil, filepath.Base(ref) == "blaise.star", err
	}
	var out []*plugdoc.Reference
	seen := map[string]bool{}
	for _, u := range cfg.Uses {
		if seen[u.Key] {
			continue
		}
		seen[u.Key] = true
		r, err := plugdoc.Of(u.Ref, u.Plug)
		if err != nil {
			return nil, true, err
		}
		out = append(out, r)
	}
	return out, true, nil
}

// Validate makes --json mean --format json.
func (c *DocCmd) Validate() error { return jsonFormat(c.JSON, &c.Format) }
