package enginetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/charmbracelet/log"
)

// RoleEnv names what the test binary is when a test starts it again: the
// demo agent, or a session process of one of the kinds below.
const RoleEnv = "BLAISE_TEST_ROLE"

// The roles of the test binary.
const (
	roleDemoAgent = "demo-agent"
	// A session process, as `blaise-agent session-process` is.
	roleSessionProcess = "session-process"
	// One that reports its plugs loaded, then nothing: a run that ignores
	// its stops.
	roleDeaf = "deaf-session-process"
	// One that loads its plugs once the test opens and closes the fifo
	// $GATE.
	roleGated = "gated-session-process"
)

// ServeRole serves the role RoleEnv gives the test binary; ok is false
// when it has none. TestMain calls it first and exits with code when ok.
func ServeRole() (code int, ok bool) {
	switch os.Getenv(RoleEnv) {
	case roleDemoAgent:
		if err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{StateDir: os.Getenv("DEMO_STATE"), Log: os.Stderr}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		return 0, true
	case roleSessionProcess:
		return serveSessionProcess(false), true
	case roleDeaf:
		return serveSessionProcess(true), true
	case roleGated:
		gate, err := os.Open(os.Getenv("GATE"))
		if err == nil {
			_, err = io.Copy(io.Discard, gate)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		return serveSessionProcess(false), true
	}
	return 0, false
}

// serveSessionProcess parses the flags a front end (Engine.launch, with
// --state-dir) or a runner (--store-fd, --store-server, --config) passes, as
// `blaise-agent session-process` does, and serves the run.
func serveSessionProcess(deaf bool) int {
	args := os.Args[1:]
	if os.Getenv(engine.SpareEnv) != "" {
		var err error
		if args, err = engine.AwaitRun(); errors.Is(err, engine.ErrNoRunHanded) {
			return 0
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fs := flag.NewFlagSet(roleSessionProcess, flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "")
	storeFD := fs.Int("store-fd", 0, "")
	storeServer := fs.String("store-server", "", "")
	config := fs.String("config", "", "")
	id := fs.String("session", "", "")
	kind := fs.String("kind", "", "")
	number := fs.Int("run", 0, "")
	endReason := fs.String("end-reason", "", "")
	stopGrace := fs.Duration("stop-grace", 0, "")
	carry := fs.Bool("carry", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if deaf {
		if lifecycle.Kind(*kind) == lifecycle.TeardownRun {
			return 0
		}
		ctl := engine.NewControlConn(os.NewFile(3, "control"), os.NewFile(3, "control"))
		_ = ctl.Send(lifecycle.Control{Kind: lifecycle.ControlLoaded, Run: *number, Loaded: &lifecycle.Loaded{Resumable: true, Settings: lifecycle.DefaultSettings()}})
		select {}
	}
	err := chain.ServeInherited(&chain.SessionProcess{
		SessionID: *id,
		Kind:      lifecycle.Kind(*kind),
		Run:       *number,
		EndReason: lifecycle.Reason(*endReason),
		Logger:    log.New(os.Stderr),
		StopGrace: *stopGrace,
		Config:    *config,
		Carry:     *carry,
	}, *stateDir, *storeFD, *storeServer)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
