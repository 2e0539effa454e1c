package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/hosts/hostd"
)

// HostdCmd is `blaise-agent hostd`.
type HostdCmd struct {
	Workspace    string `help:"Directory where work happens: relative paths and commands without a directory resolve against it (default: the working directory)."`
	ClaimVersion int    `name:"claim-protocol-version" hidden:"" help:"Announce this protocol version instead of the real one (for tests of version mismatches)."`
}

// Run serves this machine over the hostd protocol on stdin and stdout
// until the stream closes; then it kills every process it started.
func (c *HostdCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	l := g.Logger().WithPrefix("hostd")
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return fmt.Errorf("hostd speaks the hostd protocol on stdin and stdout; run it through a command such as ssh or docker exec -i, not on a terminal")
	}
	return hostd.ServeStdio(ctx, c.Workspace, hostd.ServeOptions{Log: l, ClaimVersion: c.ClaimVersion})
}
