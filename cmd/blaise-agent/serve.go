package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
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

// ServeCmd is `blaise-agent serve`: serving, or backing up what it
// serves.
type ServeCmd struct {
	Start  ServeStartCmd  `cmd:"" default:"withargs" help:"Serve: what serve does without a subcommand, with the same flags (--addr, --data, --db, --tls-cert, --metrics-addr …), which blaise-agent serve start --help lists."`
	Backup ServeBackupCmd `cmd:"" help:"Back up a server's SQLite store while it serves: one tar archive of its database and transcripts, to extract into an empty data directory beside its store key (docs/server.md#backups)."`
}

// ServeStartCmd serves.
type ServeStartCmd struct {
	StoreFlags
	Addr            string        `help:"Where to listen (host:port); a host other than loopback serves other machines." default:"127.0.0.1:7420"`
	TLSCert         string        `name:"tls-cert" help:"Serve TLS with this certificate (PEM)." type:"path"`
	TLSKey          string        `name:"tls-key" help:"The TLS certificate's private key (PEM)." type:"path"`
	Lease           time.Duration `help:"How long a run whose runner is gone, or that ignores a timeout stop, has before it is failed." default:"1m"`
	StopGrace       time.Duration `help:"How long a handler still attaching when its run is stopped may take to reach next() (default 10s); a run killed for ignoring its stop has this and 5s more between SIGTERM and SIGKILL."`
	MaxConns        int           `help:"Connections open at once, at most; more are closed as they come (default: three quarters of the file descriptor limit, less 256)." placeholder:"N"`
	MaxConnsPerAddr int           `help:"Connections of one IP address open at once, at most; 0: no cap (behind a reverse proxy, whose address all connections have)." default:"256" placeholder:"N"`
	MetricsAddr     string        `help:"Also serve the Prometheus metrics at /metrics on this address (host:port), without a token; they are always at /metrics on --addr with an API token." placeholder:"ADDR"`
	DebugAddr       string        `help:"Serve Go's profiles (net/http/pprof, /debug/pprof/) on this loopback address (127.0.0.1:PORT)." placeholder:"ADDR"`
}

// Run serves until SIGINT or SIGTERM.
func (c *ServeStartCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, server.Options{
		StoreOptions: c.options(), Addr: c.Addr, TLSCert: c.TLSCert, TLSKey: c.TLSKey, Lease: c.Lease, StopGrace: c.StopGrace,
		Log: g.Logger().WithPrefix("serve"), Version: buildinfo.Version(),
		MaxConns: c.MaxConns, MaxConnsPerAddr: c.MaxConnsPerAddr, MetricsAddr: c.MetricsAddr, DebugAddr: c.DebugAddr,
	})
}

// ServeBackupCmd is `blaise-agent serve backup FILE`.
type ServeBackupCmd struct {
	StoreFlags
	File string `arg:"" help:"The archive to write (tar); replaced only once it is whole." type:"path"`
}

// Run writes the backup.
func (c *ServeBackupCmd) Run(g *Globals) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := c.options().OpenExisting(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Backup(ctx, c.File); err != nil {
		return err
	}
	abs, _ := filepath.Abs(c.File)
	fmt.Fprintf(os.Stdout, "backed up %s to %s\n", store, abs)
	return nil
}
