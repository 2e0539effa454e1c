package main

import (
	"cmp"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/agentcaps"
	"github.com/blaiseagent/blaise-agent/internal/acp/front"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
	"github.com/charmbracelet/log"
)

// AcpCmd is `blaise-agent acp`: the chain as an ACP agent on stdio, for
// editors and other ACP clients (see docs/editors.md).
type AcpCmd struct {
	ConfigFlag
	ShutdownTimeout time.Duration `help:"How long to wait, once the client is gone, for its sessions to pause or end." default:"2m"`
	SessionFlags
	ServerFlags
	Agent string `help:"With --server: the agent whose sessions to serve." placeholder:"NAME"`
}

// Run serves the client on stdin and stdout until it disconnects.
func (c *AcpCmd) Run(g *Globals) error {
	// Signals are heard from the start: a sweep's teardowns can be slow.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Server != "" {
		return apiclient.ServeACP(ctx, c.client(), c.Agent, os.Stdin, os.Stdout)
	}
	logger := g.Logger().WithPrefix("acp")
	// Where sessions were kept before, the first session's process starts
	// at once: it takes longer to start than the client to ask for a
	// session. A state directory is made only for a configuration that
	// loads.
	withSpare := func(e *engine.Engine, err error) (*engine.Engine, error) {
		if e != nil {
			e.Log, e.Spare = logger, engine.NewSpare(e)
		}
		return e, err
	}
	kept, err := filestore.StoreExists(c.dir())
	if err != nil {
		return err
	}
	var e *engine.Engine
	defer func() {
		if e != nil {
			e.Spare.Drop()
		}
	}()
	if kept {
		if e, err = withSpare(c.engine(g)); err != nil {
			return err
		}
		startSpare(e, logger)
	}
	// A configuration that does not load is the person's to fix now, not
	// an error for the editor to show at its first session.
	cfg, err := chain.LoadConfig(c.Config, logger)
	if err != nil {
		return err
	}
	if e == nil {
		if e, err = withSpare(c.engine(g)); err != nil {
			return err
		}
	}
	// The front end passes the agent's session/updates on as they come.
	e.Bundled = true
	// Set before the first sweep, whose teardown runs report to it.
	e.Settled = func(r *lifecycle.Record) {
		logger.Debug("session settled", "session", r.ID, "state", r.State, "reason", r.EndReason)
	}
	// Earlier sessions are settled when the client first asks about one,
	// or once the agent has answered its first session/new: what may
	// concern them waits for it (front.Server.Settle). Then, for as long as
	// the client stays, paused sessions expire and failed teardowns are
	// retried (L6, L2). Process-long: ends with ctx, as the process does.
	settled := make(chan struct{})
	settle := func() {
		go func() {
			if err := e.Sweep(ctx); err != nil {
				logger.Warn("settling earlier sessions", "err", err)
			}
			close(settled)
			e.Keep(ctx)
		}()
	}
	abs, err := filepath.Abs(c.Config)
	if err != nil {
		return err
	}
	a := cfg.Agent
	caps := agentcaps.Open(c.dir(), abs, agentcaps.Agent{Command: a.Command, Args: a.Args, Env: a.Env, Cwd: a.Cwd},
		cmp.Or(c.StartupLimit, lifecycle.DefaultStartupLimit))
	// In a new state directory, the first session's process starts now,
	// while the client says hello; on a configuration's first start, once
	// the agent alone has answered initialize: both starting at once
	// slowed that answer, on 2 cores.
	var capabilities front.Capabilities = caps
	if known, tried := caps.Known(); known != nil || tried {
		startSpare(e, logger)
	} else {
		capabilities = answeredThen{caps, func() { startSpare(e, logger) }}
	}
	srv := &front.Server{
		Capabilities:    capabilities,
		Settled:         settled,
		Settle:          settle,
		Sessions:        front.FromEngine(e),
		Config:          c.Config,
		In:              os.Stdin,
		Out:             os.Stdout,
		Log:             logger,
		ShutdownTimeout: c.ShutdownTimeout,
		Version:         buildinfo.Version(),
	}
	return srv.Run(ctx)
}

// answeredThen is Capabilities that calls then once the agent alone has
// answered initialize.
type answeredThen struct {
	front.Capabilities
	then func()
}

func (c answeredThen) Learn(ctx context.Context, clientParams []byte, answered func(result []byte)) error {
	return c.Capabilities.Learn(ctx, clientParams, func(result []byte) {
		answered(result)
		c.then()
	})
}

// startSpare starts e's spare session process, unless one is started.
func startSpare(e *engine.Engine, logger *log.Logger) {
	if err := e.Spare.Start(); err != nil {
		logger.Debug("no spare session process", "err", err)
	}
}
