package docs_test

// Tests of docs/messages.md: its examples load, the complete example plugs
// do what the doc says when a client talks to the demo agent through them,
// and its table of methods is the one of internal/acp/methods.go.
//
// The examples of messages.md are named messages-example-N/PATH (not
// example-N/PATH as in plugs.md and config.md), and their blaise.star start
// the agent with
//
//	agent(command = "blaise-agent", args = ["demo-agent"])
//
// which is what a reader types. A test has no blaise-agent binary on its
// PATH, so runExample replaces that line with an agent() that starts this
// test binary, with BLAISE_TEST_AGENT=demo: TestMain then serves the demo
// agent (demoagent.Run) on stdio, as internal/chain/proxy_test.go does. The plugs are
// used as written.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as the agent: with
// BLAISE_TEST_AGENT=demo it runs the demo agent on its stdio.
func TestMain(m *testing.M) {
	if os.Getenv("BLAISE_TEST_AGENT") == "demo" {
		err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{StateDir: os.Getenv("DEMO_STATE"), Log: os.Stderr})
		var exit demoagent.ErrExit
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const messagesDoc = "messages.md"

// agentPlaceholder is the agent() line of the examples' blaise.star.
const agentPlaceholder = `agent(command = "blaise-agent", args = ["demo-agent"])`

var messagesExampleDir = regexp.MustCompile(`^messages-example-[0-9]+$`)

// messageExamples returns the complete files of messages.md by example
// (messages-example-N), with their names relative to the example.
func messageExamples(t *testing.T) map[string][]block {
	t.Helper()
	return exampleGroups(t, messagesDoc, messagesExampleDir, "messages-example-N/PATH")
}

// TestMessagesExamplesLoad loads every example's blaise.star as written in
// the doc, with every plug it uses.
func TestMessagesExamplesLoad(t *testing.T) {
	groups := messageExamples(t)
	for _, g := range writeExamples(t, groups) {
		t.Run(g, func(t *testing.T) {
			checkExample(t, messagesDoc, g, groups[g])
			for _, b := range groups[g] {
				if path.Base(b.name) == "blaise.star" && !strings.Contains(b.text, agentPlaceholder) {
					t.Errorf("%s:%d: %s does not start the demo agent with %s, so the test cannot run it", messagesDoc, b.line, b.name, agentPlaceholder)
				}
			}
		})
	}
}

// TestMessagesMethodTable checks the table of methods in messages.md
// against acp.Methods: the same methods, directions, kinds and stability.
func TestMessagesMethodTable(t *testing.T) {
	text, err := os.ReadFile(messagesDoc)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\| ([^|]+) \\| (yes|no) \\|$")
	rows := row.FindAllStringSubmatch(string(text), -1)
	documented := map[string]bool{}
	for _, r := range rows {
		name, sent, kind, stable := r[1], strings.TrimSpace(r[2]), strings.TrimSpace(r[3]), r[4] == "yes"
		if documented[name] {
			t.Errorf("%s is in the table twice", name)
		}
		documented[name] = true
		m, ok := acp.Lookup(name)
		if !ok {
			t.Errorf("%s is in the table but not in acp.Methods", name)
			continue
		}
		wantSent := map[acp.Side]string{acp.ToAgent: "client → agent", acp.ToClient: "agent → client", acp.Both: "either way"}[m.Side]
		if sent != wantSent {
			t.Errorf("%s: sent %q, want %q", name, sent, wantSent)
		}
		wantKind := "request"
		switch {
		case m.Request && m.Notification:
			wantKind = "request or notification"
		case m.Notification:
			wantKind = "notification"
		}
		if kind != wantKind {
			t.Errorf("%s: kind %q, want %q", name, kind, wantKind)
		}
		if stable != m.Stable {
			t.Errorf("%s: stable %v, want %v", name, stable, m.Stable)
		}
	}
	for name := range acp.Methods {
		if !documented[name] {
			t.Errorf("%s is in acp.Methods but not in the table of %s", name, messagesDoc)
		}
	}
}

// proxySession is a run of an example's chain around the demo agent, with the
// test as its ACP client, connected by pipes.
type proxySession struct {
	*acptest.Client
	t       *testing.T
	dir     string // the example's directory, also the ACP session's cwd
	run     *chain.Run
	done    chan chain.Result
	logs    *testsupport.Buffer
	records *testsupport.Buffer
	rec     *acp.JSONLRecorder
}

// runExample runs example group of messages.md (see startChain).
func runExample(t *testing.T, group string) *proxySession {
	t.Helper()
	bs := messageExamples(t)[group]
	if len(bs) == 0 {
		t.Fatalf("%s has no example %s", messagesDoc, group)
	}
	files := map[string]string{}
	for _, b := range bs {
		files[strings.TrimPrefix(b.name, group+"/")] = b.text
	}
	if !strings.Contains(files["blaise.star"], agentPlaceholder) {
		t.Fatalf("%s: %s/blaise.star lacks %s", messagesDoc, group, agentPlaceholder)
	}
	return startChain(t, files)
}

// startChain writes files (by path; blaise.star is the configuration) to a
// temporary directory, points the agent() of blaise.star at the demo agent
// (see the top of this file) and starts a run with the test as the client.
func startChain(t *testing.T, files map[string]string) *proxySession {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if name == "blaise.star" {
			demo := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"demo\", \"DEMO_STATE\": %q})",
				os.Args[0], filepath.Join(t.TempDir(), "demo-state"))
			text = strings.Replace(text, agentPlaceholder, demo, 1)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(dir, "blaise.star")
	logs := &testsupport.Buffer{}
	logger := log.NewWithOptions(logs, log.Options{Level: log.DebugLevel})
	cfg, err := chain.LoadConfig(config, logger)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &proxySession{t: t, dir: dir, done: make(chan chain.Result, 1), logs: logs, records: &testsupport.Buffer{}}
	s.Client = &acptest.Client{
		T:    t,
		In:   acptest.Read(outR, func(err error) { t.Errorf("the client got a line that is not a message: %v", err) }),
		Out:  acptest.WriteLines(inW),
		Logs: logs.String,
	}
	s.rec = acp.NewJSONLRecorder(s.records)
	s.run = chain.New(chain.Options{
		Config:     cfg,
		SessionID:  "s1",
		Kind:       lifecycle.StartRun,
		Logger:     logger,
		AgentGrace: time.Second,
		Client:     &chain.Client{In: inR, Out: outW},
		Recorder:   s.rec,
	})
	go func() {
		res := s.run.Execute(context.Background())
		outW.Close()
		s.done <- res
	}()
	t.Cleanup(func() {
		s.run.Stop(lifecycle.Stop{Reason: "closed"})
		inW.Close()
		s.Drain()
		select {
		case res := <-s.done:
			s.done <- res
		case <-time.After(20 * time.Second):
			t.Error("the run did not end")
		}
	})
	return s
}

// recorded closes the transcript and returns its records.
func (s *proxySession) recorded() []acp.Record {
	s.t.Helper()
	if err := s.rec.Close(); err != nil {
		s.t.Fatalf("transcript: %v", err)
	}
	return acptest.Records(s.t, s.records.String())
}

// waitLog waits until the log holds want.
func (s *proxySession) waitLog(want string) {
	s.t.Helper()
	if !testsupport.Wait(func() bool { return strings.Contains(s.logs.String(), want) }) {
		s.t.Fatalf("the log lacks %q:\n%s", want, s.logs)
	}
}

func TestMessagesExampleRedact(t *testing.T) {
	// The runner's environment holds a token the agent inherits.
	t.Setenv("DEMO_TOKEN", "tok-5ecret-123")
	s := runExample(t, "messages-example-1")
	sid := s.Open(s.dir)
	before, _ := s.Turn(3, sid, "my password is hunter2\nall clear")
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: my password is [redacted]|echo: all clear" {
		t.Fatalf("the client got %q", got)
	}
	before, _ = s.Turn(4, sid, "/env DEMO_TOKEN")
	if got := strings.Join(acptest.Chunks(before), "|"); got != "DEMO_TOKEN=[redacted]" {
		t.Fatalf("the client got %q", got)
	}
	var agentSaw, unchanged bool
	for _, r := range s.recorded() {
		msg := string(r.Message)
		if r.Direction == "to_agent" && strings.Contains(msg, "hunter2") {
			agentSaw = true
		}
		if r.Direction == "from_agent" && (strings.Contains(msg, "hunter2") || strings.Contains(msg, "tok-5ecret-123")) {
			t.Errorf("the transcript holds a secret toward the client: %s", msg)
		}
		// The demo agent's own encoding: an unchanged chunk went byte for byte.
		if r.Direction == "from_agent" && msg == fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"content":{"text":"echo: all clear","type":"text"},"sessionUpdate":"agent_message_chunk"}}}`, sid) {
			unchanged = true
		}
	}
	if !agentSaw {
		t.Error("the transcript lacks the prompt as the agent saw it")
	}
	if !unchanged {
		t.Errorf("the unchanged chunk was not forwarded as it came:\n%s", s.records)
	}
}

func TestMessagesExampleAutoApprove(t *testing.T) {
	s := runExample(t, "messages-example-2")
	sid := s.Open(s.dir)
	before, _ := s.Turn(3, sid, "/permission")
	for _, m := range before {
		if m.Method == "session/request_permission" {
			t.Fatalf("the client was asked: %s", m.Raw)
		}
	}
	if got := strings.Join(acptest.Chunks(before), "|"); got != "permission: allow_once" {
		t.Fatalf("the agent reported %q", got)
	}
	var tagged bool
	for _, r := range s.recorded() {
		if r.Method == "session/request_permission" {
			t.Errorf("the transcript holds the request the plug answered: %s", r.Message)
		}
		if r.Kind == "response" && r.Direction == "to_agent" && r.Plug == "acme/auto-approve" {
			tagged = true
		}
	}
	if !tagged {
		t.Errorf("no response tagged with the plug's name:\n%s", s.records)
	}
	s.waitLog("acme/auto-approve: allowed")
}

func TestMessagesExampleAutoApproveAfterCancel(t *testing.T) {
	// The plug remembers a cancel until the session's next prompt, and the
	// client gets the agent's "cancelled" result.
	s := runExample(t, "messages-example-2")
	sid := s.Open(s.dir)
	s.Prompt(3, sid, "/slow 200\nfirst\n/permission")
	s.Until(func(m *acp.Message) bool { return m.Method == "session/update" })
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	for {
		m := s.Next()
		if m.Kind == acp.Request && m.Method == "session/request_permission" {
			// Sent after the cancel: the plug leaves it to the client, which
			// answers "cancelled" as ACP requires.
			s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"cancelled"}}}`, m.ID))
			continue
		}
		if acptest.ResponseTo("3")(m) {
			if !strings.Contains(string(m.Result), `"stopReason":"cancelled"`) {
				t.Fatalf("the prompt answered %s", m.Raw)
			}
			break
		}
	}
	// The next turn is approved again.
	before, _ := s.Turn(4, sid, "/permission")
	if got := strings.Join(acptest.Chunks(before), "|"); got != "permission: allow_once" {
		t.Fatalf("the next turn reported %q", got)
	}
}

func TestMessagesExampleHouseRules(t *testing.T) {
	s := runExample(t, "messages-example-3")
	sid := s.Open(s.dir)
	before, resp := s.Turn(3, sid, "hello")
	const rules = "Follow CONTRIBUTING.md; never push to main."
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: hello|echo: "+rules {
		t.Fatalf("the agent echoed %q", got)
	}
	if !strings.Contains(string(resp.Result), `"stopReason":"end_turn"`) {
		t.Fatalf("response %s", resp.Raw)
	}
	var injected bool
	for _, r := range s.recorded() {
		if r.Direction == "to_agent" && r.Method == "session/prompt" {
			injected = strings.Contains(string(r.Message), `{"type":"text","text":"hello"},{"type":"text","text":"`+rules+`"}`)
		}
	}
	if !injected {
		t.Errorf("the transcript lacks the prompt as the agent saw it:\n%s", s.records)
	}
}

func TestMessagesExampleFSGuard(t *testing.T) {
	s := runExample(t, "messages-example-4")
	sid := s.Open(s.dir)
	before, _ := s.Turn(3, sid, "/read /etc/hostname")
	for _, m := range before {
		if m.Method == "fs/read_text_file" {
			t.Fatalf("the client got a refused request: %s", m.Raw)
		}
	}
	got := strings.Join(acptest.Chunks(before), "|")
	if !strings.HasPrefix(got, "read /etc/hostname: error: outside the workspace: /etc/hostname (-32001)") {
		t.Fatalf("the agent reported %q", got)
	}
	// "../x" from the session's directory is outside too.
	before, _ = s.Turn(4, sid, "/read "+s.dir+"/sub/../../x")
	if got := strings.Join(acptest.Chunks(before), "|"); !strings.Contains(got, "outside the workspace") {
		t.Fatalf("the agent reported %q", got)
	}
	// Inside the workspace the client is asked.
	s.Prompt(5, sid, "/read notes.txt")
	_, req := s.Until(acptest.RequestOf("fs/read_text_file"))
	if !strings.Contains(string(req.Params), filepath.Join(s.dir, "notes.txt")) {
		t.Fatalf("request %s", req.Raw)
	}
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"my notes"}}`, req.ID))
	before, _ = s.Until(acptest.ResponseTo("5"))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "read "+filepath.Join(s.dir, "notes.txt")+": my notes" {
		t.Fatalf("the agent reported %q", got)
	}
	s.waitLog("acme/fs-guard: refused")
}

func TestMessagesExampleUsage(t *testing.T) {
	s := runExample(t, "messages-example-5")
	sid := s.Open(s.dir)
	s.Turn(3, sid, "/chunks 3")
	s.Turn(4, sid, "/think hmm")
	s.waitLog("acme/usage: turn stop_reason=end_turn updates=3 kinds=agent_message_chunk:3")
	s.waitLog("acme/usage: turn stop_reason=end_turn updates=1 kinds=agent_thought_chunk:1")
	s.run.Stop(lifecycle.Stop{Reason: "idle", MayResume: true})
	s.waitLog("acme/usage: usage reason=idle context=None turns=2 updates=4 words=6 tokens=0")
}

func TestMessagesExampleTurnTimer(t *testing.T) {
	s := runExample(t, "messages-example-6")
	sid := s.Open(s.dir)
	_, resp := s.Turn(3, sid, "/sleep 300")
	var r struct {
		StopReason string `json:"stopReason"`
		Meta       struct {
			Timer struct {
				MS *int `json:"ms"`
			} `json:"acme/turn-timer"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.StopReason != "end_turn" || r.Meta.Timer.MS == nil {
		t.Fatalf("response %s", resp.Raw)
	}
	if ms := *r.Meta.Timer.MS; ms < 250 || ms > 20000 {
		t.Errorf("the turn took %d ms; want about 300", ms)
	}
	if !strings.HasPrefix(string(resp.Raw), `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","_meta":{"acme/turn-timer":{"ms":`) {
		t.Errorf("response %s", resp.Raw)
	}
	s.waitLog("acme/turn-timer: turn ms=")
}
