package engine_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine/enginetest"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// demoLab is an engine on the file store whose sessions run the demo
// agent in session processes of the test binary (enginetest's roles).
func demoLab(t *testing.T) (*engine.Engine, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "blaise.star")
	agent := fmt.Sprintf("agent(command = %q, env = {%q: \"demo-agent\", \"DEMO_STATE\": %q})\n", exe, enginetest.RoleEnv, filepath.Join(dir, "demo"))
	if err := os.WriteFile(cfg, []byte(agent), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := filestore.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	return &engine.Engine{
		Store: store, Command: []string{exe}, Dir: dir, Stderr: &testsupport.Buffer{},
		Env: append(os.Environ(), enginetest.RoleEnv+"=session-process", "GORACE=atexit_sleep_ms=0"),
	}, cfg
}

// openSession opens an ACP session on the run l.
func openSession(t *testing.T, l *engine.Live, dir string) {
	c := &acptest.Client{T: t, In: l.Messages(), Out: func(line string) error {
		m, err := acp.Parse([]byte(line))
		if err != nil {
			return err
		}
		return l.Send(m)
	}}
	c.Initialize(`{}`)
	c.NewSession(dir)
}

func TestAForkIsAPausedSessionOfItsParentWhichStaysAsItWas(t *testing.T) {
	e, cfg := demoLab(t)
	ctx := t.Context()
	live, err := e.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	openSession(t, live, e.Dir)
	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	parent, err := live.Wait(ctx)
	if err != nil || parent.State != lifecycle.Paused {
		t.Fatalf("parent %+v, %v", parent, err)
	}

	fork, err := e.Fork(ctx, parent.ID, func(l *engine.Live) error { openSession(t, l, e.Dir); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if fork.State != lifecycle.Paused || fork.ForkedFrom != parent.ID || fork.Runs != 1 || fork.Config != parent.Config || fork.Dir != parent.Dir || fork.ACPSessionID == "" {
		t.Fatalf("fork %+v", fork)
	}
	after, err := e.Store.Session(ctx, parent.ID)
	if err != nil || !after.Updated.Equal(parent.Updated) || after.State != lifecycle.Paused {
		t.Fatalf("the parent changed: %+v, %v", after, err)
	}

	// A fork whose front end fails to open it leaves nothing.
	_, err = e.Fork(ctx, parent.ID, func(*engine.Live) error { return errors.New("the agent refused") })
	if err == nil || !strings.Contains(err.Error(), "the agent refused; the fork was torn down and removed") {
		t.Fatalf("a failed fork: %v", err)
	}
	if recs, err := e.Store.Sessions(ctx); err != nil || len(recs) != 2 {
		t.Fatalf("sessions after a failed fork: %d, %v", len(recs), err)
	}

	if _, err := e.Fork(ctx, "nosuch", nil); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("a fork of an unknown session: %v", err)
	}
	if _, err := e.End(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Fork(ctx, parent.ID, nil); err == nil || !strings.Contains(err.Error(), "is ended; only a paused session can be forked") {
		t.Fatalf("a fork of an ended session: %v", err)
	}
}
