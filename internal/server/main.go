package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	_ "net/http/pprof" // on DefaultServeMux, served only on --debug-addr
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
)

// StoreOptions say where a server keeps its state.
type StoreOptions struct {
	// Data is the data directory: the SQLite database, the key file and
	// the transcripts' files.
	Data string
	// DB is a SQLite file or postgres://…; "": Data/blaise.db.
	DB string
	// KeyFile holds the key of persisted plug state; "": Data/store.key.
	// sqlstore.KeyEnv, when set, has the key instead.
	KeyFile string
}

// DefaultData is the data directory of a server: $XDG_DATA_HOME or
// ~/.local/share, then blaise-agent/server.
func DefaultData() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "blaise-agent", "server")
}

// Open opens the server's store, making it where there is none.
func (o StoreOptions) Open(ctx context.Context) (*sqlstore.Store, error) {
	data, dsn, keyFile := o.paths()
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	key, err := sqlstore.LoadKey(keyFile, sqlstore.KeyEnv)
	if err != nil {
		return nil, err
	}
	return sqlstore.Open(ctx, dsn, key, filepath.Join(data, "transcripts"))
}

// OpenExisting opens the store of a server that has run: a command about
// a server's store (tokens, a backup) given another --data than serve's
// would otherwise make an empty store and act on it, saying nothing.
func (o StoreOptions) OpenExisting(ctx context.Context) (*sqlstore.Store, error) {
	if err := o.missing(); err != nil {
		return nil, fmt.Errorf("%w: give the --data (or --db) that blaise-agent serve uses", err)
	}
	return o.Open(ctx)
}

// errNoStore is wrapped by missing's error.
var errNoStore = errors.New("no server store")

// missing says where the store's SQLite database should be, when it is
// not there.
func (o StoreOptions) missing() error {
	_, dsn, _ := o.paths()
	if path, ok := sqlstore.SQLitePath(dsn); ok && path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w at %s", errNoStore, path)
		}
	}
	return nil
}

// paths are the data directory, the database and the key file.
func (o StoreOptions) paths() (data, dsn, keyFile string) {
	data, dsn, keyFile = o.Data, o.DB, o.KeyFile
	if data == "" {
		data = DefaultData()
	}
	if dsn == "" {
		dsn = filepath.Join(data, "blaise.db")
	}
	if keyFile == "" {
		keyFile = filepath.Join(data, "store.key")
	}
	return data, dsn, keyFile
}

// Options are a server's flags.
type Options struct {
	StoreOptions
	// Addr is where to listen; a host other than loopback must be asked for.
	Addr            string
	TLSCert, TLSKey string
	Lease           time.Duration
	StopGrace       time.Duration // Server.StopGrace
	Log             *log.Logger
	Version         string
	// MaxConns and MaxConnsPerAddr: see Server.
	MaxConns, MaxConnsPerAddr int
	// MetricsAddr, when set, serves /metrics there without a token.
	MetricsAddr string
	// DebugAddr, when set, serves net/http/pprof there; loopback only.
	DebugAddr string
	// Ready, when set, is told the address the server listens on.
	Ready func(addr string)
}

// Run opens the store and serves until ctx is done.
func Run(ctx context.Context, o Options) error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if o.DebugAddr != "" {
		host, _, err := net.SplitHostPort(o.DebugAddr)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return fmt.Errorf("--debug-addr %s: want a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT): profiles show the server's memory", o.DebugAddr)
		}
	}
	// Every address is taken before anything is made or said: a port in
	// use leaves no new store and prints no setup token.
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	// The metrics' and profiles' servers end before the store closes.
	var aside sync.WaitGroup
	defer func() { cancel(); aside.Wait() }()
	context.AfterFunc(ctx, func() { ln.Close() }) // on an error before Serve
	var metricsLn, debugLn net.Listener
	if o.MetricsAddr != "" {
		if metricsLn, err = listenAside(ctx, "metrics", o.MetricsAddr); err != nil {
			return err
		}
	}
	if o.DebugAddr != "" {
		if debugLn, err = listenAside(ctx, "debug", o.DebugAddr); err != nil {
			return err
		}
	}
	store, err := o.Open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Claim(ctx); err != nil {
		return err
	}
	scheme := "http"
	if o.TLSCert != "" {
		scheme = "https"
	}
	addr := ln.Addr().String()
	if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
		o.Log.Warn("listening beyond this machine", "addr", addr)
		if o.TLSCert == "" {
			o.Log.Warn("without TLS: tokens cross the network in clear; use --tls-cert and --tls-key")
		}
	}
	o.Log.Info("serving", "url", scheme+"://"+addr, "store", store.String())
	if o.Ready != nil {
		o.Ready(scheme + "://" + addr)
	}
	if err := announceSetup(ctx, store, o.Log, scheme+"://"+addr); err != nil {
		return err
	}
	s := &Server{Store: store, Log: o.Log, Lease: o.Lease, StopGrace: o.StopGrace, Version: o.Version,
		MaxConns: o.MaxConns, MaxConnsPerAddr: o.MaxConnsPerAddr}
	if metricsLn != nil {
		// /metrics alone: a client pointed at this address by mistake
		// gets a 404, not metrics in place of what it asked for.
		mux := http.NewServeMux()
		mux.Handle("GET "+PathMetrics, s.MetricsHandler())
		serveAside(ctx, &aside, o.Log, "metrics", metricsLn, mux)
	}
	if debugLn != nil {
		serveAside(ctx, &aside, o.Log, "debug", debugLn, http.DefaultServeMux)
	}
	return s.Serve(ctx, ln, o.TLSCert, o.TLSKey)
}

// listenAside listens on addr, the metrics' or the profiles' address
// (what), apart from the API's, until ctx is done or it is served.
func listenAside(ctx context.Context, what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s-addr: %w", what, err)
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	return ln, nil
}

// serveAside serves h on ln until ctx is done; wg waits for it.
func serveAside(ctx context.Context, wg *sync.WaitGroup, l *log.Logger, what string, ln net.Listener, h http.Handler) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	wg.Go(func() { _ = hs.Serve(ln) })
	context.AfterFunc(ctx, func() { hs.Close() })
	l.Info("serving "+what, "url", "http://"+ln.Addr().String())
}

// announceSetup prints, while no one can sign in to the dashboard, a new
// setup token that creates its first admin. It is printed once: the store
// keeps only its hash, and a later start replaces it.
func announceSetup(ctx context.Context, store *sqlstore.Store, l *log.Logger, url string) error {
	tok, err := store.MintSetupToken(ctx)
	if err != nil || tok == "" {
		return err
	}
	l.Info("no dashboard user yet: create the first admin at "+url+"/setup with this setup token (shown once)", "token", tok)
	return nil
}
