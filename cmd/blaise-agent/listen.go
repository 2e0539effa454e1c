package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/server/listen"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
)

// ListenCmd is `blaise-agent listen`.
type ListenCmd struct {
	ConfigFlag
	Server        string `required:"" help:"The Blaise server's URL." env:"BLAISE_SERVER" placeholder:"URL"`
	Agent         string `required:"" help:"The agent whose runs to take." placeholder:"NAME"`
	Name          string `help:"The runner's name: 1 to 63 lowercase letters, digits or '-', starting with a letter or digit (default: the host name's first label, lowercased, with other characters replaced by '-')."`
	Credential    string `help:"The runner credential file, 0600 (default: ~/.config/blaise-agent/runners/NAME.credential)." type:"path" placeholder:"FILE"`
	RegisterToken string `help:"A registration token (blr_…) to register this runner with, when it has no credential yet." env:"BLAISE_REGISTER_TOKEN" placeholder:"TOKEN"`
	StoreRelay    bool   `help:"Carry the runs' stores over this runner's connection (runner protocol 6), not on connections of their own: for a way to the server that lets WebSocket upgrades through and no other (a runner finds this out by itself, and says so)."`
}

// Run takes runs until SIGINT or SIGTERM, then drains.
func (c *ListenCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return listen.Main(ctx, listen.Options{
		Config: c.Config, Server: c.Server, Agent: c.Agent, Name: c.Name, Credential: c.Credential, RegisterToken: c.RegisterToken, StoreRelay: c.StoreRelay,
		LogArgs: []string{"--log-level", g.LogLevel, "--log-format", g.LogFormat, "--color", "never"},
		Stderr:  os.Stderr, Log: g.Logger().WithPrefix("listen"), Version: buildinfo.Version(),
	})
}
