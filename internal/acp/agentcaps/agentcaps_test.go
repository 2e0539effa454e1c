package agentcaps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAnswerIsLearnedOnceAndKeptPerConfigurationAndAgent: the agent's
// answer to initialize is asked of it once and kept; a session's answer
// replaces it; an agent whose executable changed, or another
// configuration, is asked again; an agent that cannot answer is not
// asked again.
func TestAnswerIsLearnedOnceAndKeptPerConfigurationAndAgent(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	agent := filepath.Join(dir, "agent")
	starts := filepath.Join(dir, "starts")
	script := "#!/bin/sh\necho started >> " + starts + "\nread line\n" +
		`echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true}}}}'` + "\ncat >/dev/null\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "blaise.star")
	c := Open(state, cfg, Agent{Command: agent}, time.Minute)
	if res, tried := c.Known(); res != nil || tried {
		t.Fatalf("known before any: %s %v", res, tried)
	}
	want := `{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true}}}`
	var res []byte
	err := c.Learn(context.Background(), []byte(`{"protocolVersion":1}`), func(r []byte) { res = r })
	if err != nil || string(res) != want {
		t.Fatalf("learned %s, %v; want %s", res, err, want)
	}
	again := Open(state, cfg, Agent{Command: agent}, time.Minute)
	if res, _ := again.Known(); string(res) != want {
		t.Fatalf("kept: %s, want %s", res, want)
	}
	chain := `{"protocolVersion":1,"agentCapabilities":{}}`
	if err := again.Keep([]byte(chain)); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Known(); string(res) != chain {
		t.Fatalf("after a session's answer: %s, want %s", res, chain)
	}
	if data, _ := os.ReadFile(starts); strings.Count(string(data), "started") != 1 {
		t.Fatalf("the agent started %q", data)
	}

	if res, _ := Open(state, filepath.Join(dir, "other.star"), Agent{Command: agent}, time.Minute).Known(); res != nil {
		t.Errorf("another configuration knows %s", res)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(agent, later, later); err != nil {
		t.Fatal(err)
	}
	if res, _ := Open(state, cfg, Agent{Command: agent}, time.Minute).Known(); res != nil {
		t.Errorf("an upgraded agent knows %s", res)
	}

	missing := Open(state, cfg, Agent{Command: filepath.Join(dir, "no-such-agent")}, time.Minute)
	if err := missing.Learn(context.Background(), []byte(`{"protocolVersion":1}`), func([]byte) { t.Error("a missing agent answered") }); err == nil || !strings.Contains(err.Error(), "the agent failed to start") {
		t.Fatalf("a missing agent: %v", err)
	}
	if res, tried := missing.Known(); res != nil || !tried {
		t.Errorf("a missing agent, again: %s %v", res, tried)
	}
}

// TestAnAgentThatDoesNotAnswerIsStoppedAtTheLimit: an agent that never
// answers initialize is stopped at the startup limit, and the error says so.
func TestAnAgentThatDoesNotAnswerIsStoppedAtTheLimit(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, filepath.Join(dir, "blaise.star"), Agent{Command: "sh", Args: []string{"-c", "cat >/dev/null"}}, 50*time.Millisecond)
	err := c.Learn(context.Background(), []byte(`{"protocolVersion":1}`), func([]byte) { t.Error("a silent agent answered") })
	if err == nil || !strings.Contains(err.Error(), "the agent did not answer initialize within 50ms (the startup limit)") {
		t.Fatalf("got %v", err)
	}
}
