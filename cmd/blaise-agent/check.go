package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
)

// CheckCmd is `blaise-agent check`.
type CheckCmd struct {
	ConfigFlag
}

// Run loads the configuration, with the mistakes of the handlers' code
// that a run would meet only on the paths that have them, and prints its
// chain.
func (c *CheckCmd) Run(g *Globals) error {
	l := chain.NewLoader(g.Logger())
	l.Vet = true
	cfg, err := l.LoadConfig(c.Config)
	// Every mistake in one pass: the warnings too, when errors stop the
	// configuration.
	defer func() {
		for _, w := range l.Warnings() {
			fmt.Fprintf(os.Stderr, "warning: %s\n", w)
		}
	}()
	if err != nil {
		return err
	}
	out := os.Stdout
	fmt.Fprintf(out, "%s: agent %s\n", cfg.File, strings.Join(append([]string{cfg.Agent.Command}, cfg.Agent.Args...), " "))
	for _, u := range cfg.Uses {
		id := "-"
		if u.ID != "" {
			id = u.ID
		}
		resumable := "resumable"
		if !u.Plug.Resumable {
			resumable = "not resumable"
		}
		fmt.Fprintf(out, "  %d. %-24s id=%-10s %s (%s; %s)\n", u.Index+1, u.Plug.Name, id, u.Ref, resumable, strings.Join(u.Plug.Handlers(), ", "))
		if r, err := plugref.Parse(u.Key); err == nil {
			fmt.Fprintf(out, "     pinned to commit %s\n", r.Rev)
		}
	}
	if cfg.Resumable() {
		fmt.Fprintln(out, "the chain can resume")
	} else {
		fmt.Fprintln(out, "the chain cannot resume")
	}
	return nil
}
