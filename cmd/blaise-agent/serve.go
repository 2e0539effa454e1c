package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/buildinfo"
	"github.com/blaiseagent/blaise-agent/server"
)

// StoreFlags say where a server keeps its state.
type StoreFlags struct {
	Data    string `help:"The server's data directory: its SQLite database, store key and transcripts (default: $XDG_DATA_HOME/blaise-agent/server, else ~/.local/share/blaise-agent/server)." type:"path" env:"BLAISE_SERVER_DATA" placeholder:"DIR"`
	DB      string `help:"The database: a SQLite file, or postgres://… (default: blaise.db in the data directory)." env:"BLAISE_DB" placeholder:"DSN"`
	KeyFile string `help:"The key of persisted plug state, 0600 (default: store.key in the data directory, made if missing); $BLAISE_STORE_KEY (base64) instead." type:"path" placeholder:"FILE"`
}

func (f StoreFlags) options() server.StoreOptions {
	return server.StoreOptions{Data: f.Data, DB: f.DB, KeyFile: f.KeyFile}
}

// ServeCmd is `blaise-agent serve`.
type ServeCmd struct {
	StoreFlags
	Addr      string        `help:"Where to listen (host:port); a host other than loopback serves other machines." default:"127.0.0.1:7420"`
	TLSCert   string        `name:"tls-cert" help:"Serve TLS with this certificate (PEM)." type:"path"`
	TLSKey    string        `name:"tls-key" help:"The TLS certificate's private key (PEM)." type:"path"`
	Lease     time.Duration `help:"How long a run whose runner is gone, or that ignores a timeout stop, has before it is failed." default:"1m"`
	StopGrace time.Duration `help:"How long a handler still attaching when its run is stopped may take to reach next() (default 10s); a run killed for ignoring its stop has this and 5s more between SIGTERM and SIGKILL."`
}

// Run serves until SIGINT or SIGTERM.
func (c *ServeCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, server.Options{
		StoreOptions: c.options(), Addr: c.Addr, TLSCert: c.TLSCert, TLSKey: c.TLSKey, Lease: c.Lease, StopGrace: c.StopGrace,
		Log: g.Logger().WithPrefix("serve"), Version: buildinfo.Version(),
	})
}
