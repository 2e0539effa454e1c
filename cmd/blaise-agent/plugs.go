package main

import (
	"fmt"
	"os"

	"github.com/blaiseagent/blaise-agent/pluglock"
	"github.com/blaiseagent/blaise-agent/runner"
)

// PlugsCmd is `blaise-agent plugs`.
type PlugsCmd struct {
	Lock   PlugsLockCmd   `cmd:"" help:"Pin every git+ reference of the configuration that blaise.lock lacks to a commit and a content hash; keep the others."`
	Update PlugsUpdateCmd `cmd:"" help:"Move the pins of git+ references (all, or those named) to what their tags and branches name now, and print what changed."`
}

// PlugsLockCmd is `blaise-agent plugs lock`.
type PlugsLockCmd struct {
	ConfigFlag
}

// Run writes blaise.lock.
func (c *PlugsLockCmd) Run(g *Globals) error {
	return lockPlugs(c.Config, g, pluglock.NewResolver(pluglock.Lock))
}

// PlugsUpdateCmd is `blaise-agent plugs update`.
type PlugsUpdateCmd struct {
	ConfigFlag
	Refs []string `arg:"" optional:"" name:"ref" help:"git+ references to move, as written in the configuration (default: all)."`
}

// Run moves pins forward.
func (c *PlugsUpdateCmd) Run(g *Globals) error {
	res := pluglock.NewResolver(pluglock.Update)
	res.Only = map[string]bool{}
	for _, r := range c.Refs {
		res.Only[r] = true
	}
	return lockPlugs(c.Config, g, res)
}

// lockPlugs writes the lock and prints its changes.
func lockPlugs(config string, g *Globals, res *pluglock.Resolver) error {
	changes, err := runner.LockPlugs(config, g.Logger(), res)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		fmt.Fprintln(os.Stdout, ch)
	}
	if len(changes) == 0 {
		fmt.Fprintf(os.Stdout, "%s is up to date\n", pluglock.FileName)
	}
	return nil
}
