package server_test

// The lifecycle rules (L1–L9) on the server's engine: its SQL store
// (SQLite, PostgreSQL), its in-process run locks and its launcher of runs
// on a runner (`listen`), connected over HTTP: the same suite, under the
// same names, as the engine of a front end on one machine (enginetest).

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine/enginetest"
	"github.com/blaiseagent/blaise-agent/internal/server"
	"github.com/blaiseagent/blaise-agent/internal/server/listen"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

func TestMain(m *testing.M) {
	if code, ok := enginetest.ServeRole(); ok {
		os.Exit(code)
	}
	pgtest.Main(m)
}

func TestLifecycleOnSQLite(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, s enginetest.Setup) (*engine.Engine, string) {
		return serverEngine(t, s, "")
	})
}

func TestLifecycleOnPostgres(t *testing.T) {
	enginetest.Run(t, func(t *testing.T, s enginetest.Setup) (*engine.Engine, string) {
		return serverEngine(t, s, pgtest.DSN(t))
	})
}

// serverEngine is the engine of a server on the store dsn ("": SQLite),
// with an agent of s's settings and a runner of it connected. The engine
// runs on s's clock; the server's waits for its runners (a launch, a lost
// connection) on the machine's, and last longer than any test.
func serverEngine(t *testing.T, s enginetest.Setup, dsn string) (*engine.Engine, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store, err := server.StoreOptions{Data: t.TempDir(), DB: dsn}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	store.Clock = s.Clock
	const agent = "demo"
	if _, err := store.CreateAgent(ctx, sqlstore.Agent{Name: agent, Settings: s.Settings}); err != nil {
		t.Fatal(err)
	}
	reg, err := store.MintRegistration(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, _, err := store.Register(ctx, reg.Token, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// Both logs are shown when the test fails: a lost connection, a run
	// not re-attached.
	srvLogs, logs := &testsupport.Buffer{}, &testsupport.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server:\n%s\nrunner:\n%s", srvLogs, logs)
		}
	})
	srvLog := log.New(srvLogs)
	srvLog.SetLevel(log.DebugLevel)
	srv := &server.Server{Store: store, Log: srvLog}
	hs := httptest.NewServer(srv.Handler(ctx))
	t.Cleanup(hs.Close)

	cfgPath := filepath.Join(s.Dir, "blaise.star")
	cfg, err := chain.LoadConfig(cfgPath, log.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	connected := make(chan struct{}, 1)
	r := &listen.Runner{
		Server: hs.URL, Credential: cred, Agent: agent, Name: "r1",
		Config: cfg, ConfigPath: cfgPath, Command: s.Command, Dir: s.Dir, Env: s.Env,
		Stderr: s.Stderr, Log: log.New(logs),
		Connected: func() {
			select {
			case connected <- struct{}{}:
			default:
			}
		},
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("the runner: %v", err)
			}
		case <-time.After(enginetest.Patience):
			t.Errorf("the runner did not drain: a run of it is still going\n%s", logs)
		}
	})
	select {
	case <-connected:
	case err := <-ran:
		ran <- nil // for the cleanup
		if errors.Is(err, listen.ErrRefused) {
			// L8: a server's run never has this configuration.
			t.Skipf("the runner refuses the configuration under the agent's settings: %v", err)
		}
		t.Fatalf("the runner ended: %v\n%s", err, logs)
	case <-time.After(enginetest.Patience):
		t.Fatalf("the runner did not connect:\n%s", logs)
	}
	return srv.Engine(), agent
}
