package chain_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as the agent: with
// BLAISE_TEST_AGENT=demo it runs the demo agent on its stdio, so the tests
// talk to a real process over real pipes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "hostd":
			// The test binary as blaise-agent hostd (also when shipped).
			os.Exit(hostdMain(os.Args[2:]))
		case "relay":
			os.Exit(relayMain(os.Args[2:]))
		}
	}
	switch os.Getenv("BLAISE_TEST_AGENT") {
	case "demo":
		err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{StateDir: os.Getenv("DEMO_STATE"), Log: os.Stderr})
		if e, ok := err.(demoagent.ErrExit); ok {
			os.Exit(e.Code)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "raw":
		// A raw peer: echo every line of stdin to stdout.
		_, _ = io.Copy(os.Stdout, os.Stdin)
		os.Exit(0)
	case "garbage":
		// For each line, the line, a line that is not JSON, a response to
		// no request, and the line again: bad input from the agent's side.
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Printf("%s\nnot json at all\n{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}\n%s\n", sc.Text(), sc.Text())
		}
		os.Exit(0)
	case "flood":
		// Answer a prompt of text N with N 1 KiB session/updates, as an
		// agent streaming a long answer does.
		acptest.Flood(os.Stdin, os.Stdout)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// demoAgent is the agent() line that starts the demo agent.
func demoAgent(kind string) string {
	return fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": %q, \"DEMO_STATE\": \"$DIR/demo-state\"})\n", os.Args[0], kind)
}

// proxySession is a run with a client connected through the proxy.
type proxySession struct {
	*acptest.Client
	t       *testing.T
	c       *fixture
	run     *chain.Run
	done    chan chain.Result
	records *testsupport.Buffer
	rec     *acp.JSONLRecorder
}

func startSession(t *testing.T, files map[string]string, opts chain.Options) *proxySession {
	t.Helper()
	c := newChain(t, files)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &proxySession{t: t, c: c, done: make(chan chain.Result, 1), records: &testsupport.Buffer{}}
	s.Client = &acptest.Client{
		T:       t,
		In:      acptest.Read(outR, func(err error) { t.Errorf("client read: %v", err) }),
		Out:     acptest.WriteLines(inW),
		Timeout: 90 * time.Second,
		Logs:    c.logs.String,
	}
	s.rec = acp.NewJSONLRecorder(s.records)
	opts.Config = c.cfg
	opts.Logger = c.log
	opts.Store = c.store
	if opts.SessionID == "" {
		opts.SessionID = "s1"
	}
	if opts.Kind == "" {
		opts.Kind = lifecycle.StartRun
	}
	opts.AgentGrace = time.Second
	opts.Client = &chain.Client{In: inR, Out: outW}
	opts.Recorder = s.rec
	s.run = chain.New(opts)
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
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Error("the run did not end")
		}
	})
	return s
}

// waitResult waits for the end of a session's run.
func waitResult(t *testing.T, s *proxySession) chain.Result {
	t.Helper()
	select {
	case res := <-s.done:
		s.done <- res // for the cleanup
		return res
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end:\n%s", s.c.logs.String())
		return chain.Result{}
	}
}

// recorded returns the transcript's records.
func (s *proxySession) recorded() []acp.Record {
	s.t.Helper()
	_ = s.rec.Close()
	return acptest.Records(s.t, s.records.String())
}

func TestM1_EchoTurnThroughTheChain(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "hello")
	before, resp := s.Until(acptest.ResponseTo("3"))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: hello" {
		t.Fatalf("chunks %q", got)
	}
	if !strings.Contains(string(resp.Result), `"stopReason":"end_turn"`) {
		t.Fatalf("response %s", resp.Raw)
	}
}

func TestM1_ExtensionsAndUnknownMethodsPassUntouched(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./spy.star"))`,
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    print("SEEN", message.method)
    return next(message)
`,
	}, chain.Options{})
	s.Open(s.c.dir)
	echo := `{"jsonrpc":"2.0","id":"x-1","method":"_demo/echo","params":{"a":[1,2.50,"<&>"],"_meta":{"k":"v"}}}`
	s.Send(echo)
	_, resp := s.Until(acptest.ResponseTo(`"x-1"`))
	if string(resp.Result) != `{"a":[1,2.50,"<&>"],"_meta":{"k":"v"}}` && !strings.Contains(string(resp.Result), `"_meta":{"k":"v"}`) {
		t.Fatalf("echo result %s", resp.Result)
	}
	s.Send(`{"jsonrpc":"2.0","id":"x-2","method":"_nobody/knows","params":{}}`)
	_, resp = s.Until(acptest.ResponseTo(`"x-2"`))
	if !strings.Contains(string(resp.Error), "-32601") {
		t.Fatalf("unknown extension: %s", resp.Raw)
	}
	s.Send(`{"jsonrpc":"2.0","method":"_nobody/notice","params":{"x":1}}`)
	seen := strings.Join(s.c.lines("SEEN "), "|")
	if strings.Contains(seen, "_demo") || strings.Contains(seen, "_nobody") || !strings.Contains(seen, "initialize") {
		t.Fatalf("plugs saw %q; want typed methods only (M2)", seen)
	}
	// The agent saw the extension request byte for byte.
	for _, r := range s.recorded() {
		if r.Method == "_demo/echo" && r.Direction == "to_agent" && string(r.Message) != echo {
			t.Fatalf("recorded %s", r.Message)
		}
	}
}

func orderPlug(name string) string {
	return `plug(name = "` + name + `")
def on_message(ctx, message, next):
    if message.method == "session/prompt" or message.method == "session/update":
        print("ORDER ` + name + `", message.direction, message.method)
    return next(message)
`
}

func TestM3_ToAgentPlugOneFirstFromAgentLastFirst(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./p1.star"), use("./p2.star"), use("./p3.star"))`,
		"p1.star":     orderPlug("p1"),
		"p2.star":     orderPlug("p2"),
		"p3.star":     orderPlug("p3"),
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "hi")
	s.Until(acptest.ResponseTo("3"))
	want := "p1 to_agent session/prompt|p2 to_agent session/prompt|p3 to_agent session/prompt|" +
		"p3 from_agent session/update|p2 from_agent session/update|p1 from_agent session/update"
	if got := strings.Join(s.c.lines("ORDER "), "|"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestM4_InjectTextAndPostProcessResult(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./inject.star"))`,
		"inject.star": `plug(name = "inject")
def on_message(ctx, message, next):
    if message.method != "session/prompt":
        return next(message)
    params = message.params
    params["prompt"].append({"type": "text", "text": "/think injected"})
    result = next(message)
    result.result["_meta"] = {"seen_by": "inject"}
    return result
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "hello")
	before, resp := s.Until(acptest.ResponseTo("3"))
	var thought bool
	for _, m := range before {
		thought = thought || strings.Contains(string(m.Params), `"agent_thought_chunk"`) && strings.Contains(string(m.Params), "injected")
	}
	if !thought {
		t.Fatalf("the injected command did not reach the agent: %d updates", len(before))
	}
	if !strings.Contains(string(resp.Result), `"_meta":{"seen_by":"inject"}`) || !strings.Contains(string(resp.Result), `"stopReason":"end_turn"`) {
		t.Fatalf("result %s", resp.Result)
	}
	// The agent saw the injected text (M5).
	var sawInjected bool
	for _, r := range s.recorded() {
		if r.Direction == "to_agent" && r.Method == "session/prompt" {
			sawInjected = strings.Contains(string(r.Message), "/think injected")
		}
	}
	if !sawInjected {
		t.Fatal("the record toward the agent lacks the injected text")
	}
}

func TestM4_PlugAnswersPermissionRequest(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./approve.star"))`,
		"approve.star": `plug(name = "acme/approver")
def on_message(ctx, message, next):
    if message.method == "session/request_permission":
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/permission")
	before, _ := s.Until(acptest.ResponseTo("3"))
	for _, m := range before {
		if m.Method == "session/request_permission" {
			t.Fatal("the client got a request the plug answered")
		}
	}
	if got := strings.Join(acptest.Chunks(before), "|"); got != "permission: allow_once" {
		t.Fatalf("chunks %q", got)
	}
	var tagged bool
	for _, r := range s.recorded() {
		if r.Kind == "response" && r.Direction == "to_agent" && r.Plug == "acme/approver" {
			tagged = true
		}
	}
	if !tagged {
		t.Fatalf("no response recorded with the plug's name:\n%s", s.records)
	}
}

func TestM4_RequestErrorAndDroppedNotification(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./guard.star"))`,
		"guard.star": `plug(name = "guard")
def on_message(ctx, message, next):
    if message.method == "fs/read_text_file":
        return request_error(-32001, "reading is not allowed", data = {"path": message.params["path"]})
    if message.method == "session/update" and message.params["update"]["sessionUpdate"] == "agent_thought_chunk":
        return None
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/think secret thoughts\n/read notes.txt")
	before, _ := s.Until(acptest.ResponseTo("3"))
	for _, m := range before {
		if strings.Contains(string(m.Params), "agent_thought_chunk") {
			t.Fatal("a dropped notification reached the client")
		}
	}
	got := strings.Join(acptest.Chunks(before), "|")
	if !strings.Contains(got, "reading is not allowed (-32001)") || !strings.Contains(got, "notes.txt") {
		t.Fatalf("chunks %q", got)
	}
}

func TestM4_PlugFailingMidTurnFailsTheRun(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"), use("./boom.star"))`,
		"a.star":      tracer("a"),
		"boom.star": `plug(name = "boom")
def on_message(ctx, message, next):
    if message.method == "session/update":
        fail("cannot handle updates")
    return next(message)
`,
	}, chain.Options{IdlePolicy: lifecycle.PolicyPause})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "hello")
	s.Drain()
	res := waitResult(t, s)
	if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "plug boom: on_message: cannot handle updates") {
		t.Fatalf("pause %+v", res.Pause)
	}
	if got := strings.Join(s.c.lines("TRACE "), "|"); got != "a before|a after failed True" {
		t.Fatalf("trace %q", got)
	}
}

func TestM5_RedactionReachesTheClientNotTheAgent(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./redact.star"))`,
		"redact.star": `plug(name = "redact")
def on_message(ctx, message, next):
    if message.direction == "from_agent" and message.method == "session/update":
        u = message.params["update"]
        if u["sessionUpdate"] == "agent_message_chunk":
            u["content"]["text"] = u["content"]["text"].replace("hunter2", "[redacted]")
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "my password is hunter2")
	before, _ := s.Until(acptest.ResponseTo("3"))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: my password is [redacted]" {
		t.Fatalf("client got %q", got)
	}
	var toAgent, toClient bool
	for _, r := range s.recorded() {
		if r.Direction == "to_agent" && strings.Contains(string(r.Message), "hunter2") {
			toAgent = true
		}
		if r.Direction == "from_agent" && strings.Contains(string(r.Message), "hunter2") {
			toClient = true
		}
	}
	if !toAgent || toClient {
		t.Fatalf("records: agent saw original %v, client record has secret %v", toAgent, toClient)
	}
}

func TestM5_ReplayedHistoryIsNotRecordedAgain(t *testing.T) {
	files := map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./count.star"))`,
		"count.star": `plug(name = "count")
def on_message(ctx, message, next):
    if message.method == "session/update":
        print("UPDATE")
    return next(message)
`,
	}
	s := startSession(t, files, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "remember me")
	first, _ := s.Until(acptest.ResponseTo("3"))
	s.LoadSession(4, sid, s.c.dir)
	before, _ := s.Until(acptest.ResponseTo("4"))
	if len(before) == 0 {
		t.Fatal("no replay")
	}
	if n := len(s.c.lines("UPDATE")); n != len(first)+len(before) {
		t.Fatalf("plugs saw %d updates; want the %d of the turn and the %d of the replay", n, len(first), len(before))
	}
	updates := 0
	for _, r := range s.recorded() {
		if r.Method == "session/update" {
			updates++
		}
	}
	if updates != len(first) {
		t.Fatalf("recorded %d updates; want only the %d of the first turn", updates, len(first))
	}
}

func TestM6_SlowPlugKeepsOrder(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./slow.star"))`,
		"slow.star": `plug(name = "slow")
def on_message(ctx, message, next):
    if message.method == "session/update" and "chunk 1\"" in str(message.params):
        ctx.runner.exec(["sleep", "0.2"])
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/chunks 20")
	before, _ := s.Until(acptest.ResponseTo("3"))
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("chunk %d", i))
	}
	if got := strings.Join(acptest.Chunks(before), "|"); got != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
}

func TestM6_WaitingPlugDoesNotHoldUpTheTurn(t *testing.T) {
	// The plug waits in next() for the prompt's result while the turn's
	// updates and the agent's permission request pass through it.
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./wait.star"))`,
		"wait.star": `plug(name = "wait")
def on_message(ctx, message, next):
    if message.method == "session/prompt":
        print("WAIT start")
        r = next(message)
        print("WAIT done")
        return r
    print("WAIT pass", message.method)
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/chunks 2\n/permission")
	_, req := s.Until(acptest.RequestOf("session/request_permission"))
	// The client's id space and the agent's collide: answer with the agent's id.
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`, req.ID))
	before, _ := s.Until(acptest.ResponseTo("3"))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "permission: reject_once" {
		t.Fatalf("chunks after permission %q", got)
	}
	lines := strings.Join(s.c.lines("WAIT "), "|")
	if !strings.HasSuffix(lines, "pass session/update|pass session/request_permission|pass session/update|done") {
		t.Fatalf("handler calls %q", lines)
	}
}

func TestM6_IDsCollideAcrossDirections(t *testing.T) {
	// The agent's first request to the client has id 0 or 1 in its own id
	// space; the client's prompt uses the same id.
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission"}]}}`, sid))
	_, req := s.Until(acptest.RequestOf("session/request_permission"))
	id := string(req.ID)
	// A client request with the very same id, while the agent's is pending.
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"_demo/echo","params":{"same":"id"}}`, id))
	_, echo := s.Until(acptest.ResponseTo(id))
	if !strings.Contains(string(echo.Result), `"same":"id"`) {
		t.Fatalf("echo %s", echo.Raw)
	}
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, id))
	before, _ := s.Until(acptest.ResponseTo(`"p"`))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "permission: allow_once" {
		t.Fatalf("chunks %q", got)
	}
}

func TestM7_BadLinesAreSkippedAndLogged(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{MaxLine: 1 << 20})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "one")
	s.Send(`this is not json`)
	s.Send(`{"jsonrpc":"2.0","id":999,"result":{}}`)
	s.Send(`{"jsonrpc":"2.0","id":5,"method":"_demo/echo","params":{"big":"` + strings.Repeat("x", 2<<20) + `"}}`)
	s.Prompt(4, sid, "two")
	// The messages around the bad lines all arrive: both turns, with their
	// answers.
	before, _ := s.Until(acptest.ResponseTo("4"))
	answered := map[string]bool{}
	for _, m := range before {
		if m.Kind == acp.Response {
			answered[string(m.ID)] = true
		}
	}
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: one|echo: two" || !answered["3"] {
		t.Fatalf("chunks %q, answers %v", got, answered)
	}
	for _, want := range []string{"skipped a bad line", "invalid JSON", "dropped a response to an unknown request", "exceeds the limit of 1048576 bytes"} {
		if !strings.Contains(s.c.logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// Bad lines from the agent's side are skipped and logged too, and the
// messages around them reach the client (M7).
func TestM7_BadLinesFromTheAgentAreSkipped(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("garbage") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{})
	line := `{"jsonrpc":"2.0","method":"_x/note","params":{"n":1}}`
	s.Send(line)
	for range 2 {
		if m := s.Next(); string(m.Raw) != line {
			t.Fatalf("the client got %s, want %s", m.Raw, line)
		}
	}
	for _, want := range []string{"skipped a bad line from=agent", "invalid JSON", "dropped a response to an unknown request id=424242"} {
		if !strings.Contains(s.c.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, s.c.logs.String())
		}
	}
}

func TestM7_FiftyMiBLine(t *testing.T) {
	// The raw agent echoes each line: a 50 MiB session/cancel passes the
	// plug toward the agent and comes back untyped toward the client.
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("raw") + `setup(use("./spy.star"))`,
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    print("SPY", message.method, len(message.params["_meta"]["blob"]))
    return next(message)
`,
	}, chain.Options{})
	// 50 MiB through the race detector on a busy machine takes its time.
	s.Timeout = 5 * time.Minute
	big := strings.Repeat("y", 50<<20)
	line := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","_meta":{"blob":"` + big + `"}}}`
	go s.Send(line)
	m := s.Next()
	if string(m.Raw) != line {
		t.Fatalf("got %d bytes, want the %d sent", len(m.Raw), len(line))
	}
	if got := strings.Join(s.c.lines("SPY "), "|"); got != fmt.Sprintf("session/cancel %d", 50<<20) {
		t.Fatalf("plug saw %q", got)
	}
}

func TestM6_CancelReachesAgentOnceAndClientGetsCancelled(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./count.star"))`,
		"count.star": `plug(name = "count")
def on_message(ctx, message, next):
    if message.method == "session/cancel":
        print("CANCEL seen")
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/slow 50\n/chunks 100")
	s.Next()
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	_, resp := s.Until(acptest.ResponseTo("3"))
	if !strings.Contains(string(resp.Result), `"stopReason":"cancelled"`) || resp.Error != nil {
		t.Fatalf("response %s", resp.Raw)
	}
	cancels := 0
	for _, r := range s.recorded() {
		if r.Method == "session/cancel" && r.Direction == "to_agent" {
			cancels++
		}
	}
	if cancels != 1 || len(s.c.lines("CANCEL seen")) != 1 {
		t.Fatalf("the agent got %d cancels; plugs saw %d", cancels, len(s.c.lines("CANCEL seen")))
	}
}

func TestM7_PendingRequestsAnsweredWhenTheAgentStops(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/sleep 60000")
	testsupport.Eventually(t, "the prompt to reach the agent", func() bool {
		for _, r := range acptest.Records(t, s.records.String()) {
			if r.Direction == acp.ToAgent.Direction() && r.Method == "session/prompt" {
				return true
			}
		}
		return false
	})
	s.run.Stop(lifecycle.Stop{Reason: "idle", MayResume: true})
	_, resp := s.Until(acptest.ResponseTo("3"))
	if resp.Error == nil && !strings.Contains(string(resp.Result), "cancelled") {
		t.Fatalf("response %s", resp.Raw)
	}
}

func TestM2_MisfitParamsAreLoggedAndPassedAsTheyCame(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./spy.star"))`,
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    if message.method == "session/prompt":
        print("SPY prompt is", type(message.params["prompt"]))
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	bad := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":%q,"prompt":"not a list"}}`, sid)
	s.Send(bad)
	_, resp := s.Until(acptest.ResponseTo("7"))
	if resp.Error == nil {
		t.Fatalf("the agent accepted a misfit prompt: %s", resp.Raw)
	}
	if got := strings.Join(s.c.lines("SPY "), "|"); got != "prompt is string" {
		t.Fatalf("plug saw %q", got)
	}
	var passed bool
	for _, r := range s.recorded() {
		passed = passed || r.Direction == "to_agent" && string(r.Message) == bad
	}
	if !passed {
		t.Fatal("the misfit message did not reach the agent as it came")
	}
	if !testsupport.Wait(func() bool { return strings.Contains(s.c.logs.String(), "params do not fit the ACP schema") }) {
		t.Fatalf("no protocol warning in:\n%s", s.c.logs)
	}
}

func TestM7_AReusedPendingRequestIDIsRefused(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./a.star"))`,
		"a.star":      tracer("a"),
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(7, sid, "/sleep 500\nfirst")
	// The same id again while the prompt waits for its answer: refused,
	// and the first request still gets its own answer.
	s.Send(`{"jsonrpc":"2.0","id":7,"method":"_demo/echo","params":{}}`)
	_, refused := s.Until(acptest.ResponseTo("7"))
	if !strings.Contains(string(refused.Error), `"code":-32600`) || !strings.Contains(string(refused.Error), "still waiting") {
		t.Fatalf("refusal %s", refused.Raw)
	}
	before, answer := s.Until(acptest.ResponseTo("7"))
	if !strings.Contains(string(answer.Result), "end_turn") || strings.Join(acptest.Chunks(before), "|") != "echo: first" {
		t.Fatalf("answer %s after %q", answer.Raw, acptest.Chunks(before))
	}
}

// next() of on_message takes the message once: a second call, or anything
// but a message, fails the handler with a message that says so (M4).
func TestM4_NextMisuseInOnMessageFailsClearly(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"twice", "next(message)\n    return next(message)", "next() called twice for one message; call it at most once"},
		{"not a message", "return next(message.params)", "next: want the message (or message.replace(...)), got object"},
		{"keyword", "return next(message = message)", "next: unexpected keyword arguments"},
		{"no message", "return next()", "next: got 0 arguments, want 1: the message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startSession(t, map[string]string{
				"blaise.star": demoAgent("demo") + `setup(use("./bad.star"))`,
				"bad.star": `plug(name = "bad")
def on_message(ctx, message, next):
    if message.method != "session/prompt":
        return next(message)
    ` + tt.body + "\n",
			}, chain.Options{})
			sid := s.Open(s.c.dir)
			s.Prompt(3, sid, "hello")
			s.Drain()
			res := waitResult(t, s)
			if res.Pause.Reason != "failed" || !strings.Contains(res.Pause.Err.Error(), "plug bad: on_message") || !strings.Contains(res.Pause.Err.Error(), tt.want) {
				t.Fatalf("pause %+v, want an error with %q", res.Pause, tt.want)
			}
		})
	}
}

// An extension notification of the agent reaches the client as it was sent,
// is recorded, and no plug sees it (M1, M2).
func TestM2_AgentExtensionPassesUntouchedAndUnseen(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./spy.star"))`,
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    print("SEEN", message.method)
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/ext hi")
	before, _ := s.Until(acptest.ResponseTo("3"))
	var ping *acp.Message
	for _, m := range before {
		if m.Method == "_demo/ping" {
			ping = m
		}
	}
	if ping == nil || ping.Kind != acp.Notification || string(ping.Params) != fmt.Sprintf(`{"sessionId":%q,"text":"hi"}`, sid) {
		t.Fatalf("the client got no _demo/ping as sent: %v", ping)
	}
	seen := strings.Join(s.c.lines("SEEN "), "|")
	if strings.Contains(seen, "_demo/ping") || !strings.Contains(seen, "session/update") {
		t.Fatalf("plugs saw %q", seen)
	}
	recorded := false
	for _, r := range s.recorded() {
		recorded = recorded || r.Method == "_demo/ping" && r.Direction == "from_agent" && string(r.Message) == string(ping.Raw)
	}
	if !recorded {
		t.Fatal("the ping is not in the transcript as it was sent")
	}
}

// message.kind, .id and .direction, and replace(params = …) toward the agent
// and replace(result = …) on the answer (M4).
func TestM4_ReplaceParamsAndResultKindAndID(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_message(ctx, message, next):
    if message.method == "session/prompt":
        print("PROMPT", message.kind, message.id, message.direction)
        m = message.replace(params = {"sessionId": message.params["sessionId"], "prompt": [{"type": "text", "text": "replaced"}]})
        resp = next(m)
        print("RESP", resp.kind, resp.id, resp.direction)
        return resp.replace(result = {"stopReason": resp.result["stopReason"], "_meta": {"by": "p"}})
    if message.method == "session/update":
        print("UPDATE", message.kind, message.id, message.direction)
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "original")
	before, resp := s.Until(acptest.ResponseTo("3"))
	if got := strings.Join(acptest.Chunks(before), "|"); got != "echo: replaced" {
		t.Fatalf("the agent answered %q, not the replaced prompt", got)
	}
	if string(resp.Result) != `{"stopReason":"end_turn","_meta":{"by":"p"}}` {
		t.Fatalf("the client got %s", resp.Result)
	}
	for prefix, want := range map[string]string{
		"PROMPT ": "request 3 to_agent",
		"RESP ":   "response 3 to_agent",
		"UPDATE ": "notification None from_agent",
	} {
		if got := s.c.lines(prefix); len(got) == 0 || got[0] != want {
			t.Errorf("%s: %q, want %q", prefix, got, want)
		}
	}
}

// Toward the agent too, messages behind one a plug takes its time over
// wait for it, and reach the agent in the order the client sent them (M6).
func TestM6_ClientMessagesKeepOrderBehindASlowPlug(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./slow.star"))`,
		"slow.star": `plug(name = "slow")
def on_message(ctx, message, next):
    if message.method == "session/cancel" and message.params["sessionId"] == "c1":
        ctx.runner.exec(["sleep", "0.2"])
    return next(message)
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	for _, id := range []string{"c1", "c2", "c3"} {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, id))
	}
	s.Prompt(3, sid, "after")
	s.Until(acptest.ResponseTo("3"))
	var order []string
	for _, r := range s.recorded() {
		if r.Direction == "to_agent" && (r.Method == "session/cancel" || r.Method == "session/prompt") {
			m, err := acp.Parse(r.Message)
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, r.Method+" "+string(m.Params))
		}
	}
	want := []string{
		`session/cancel {"sessionId":"c1"}`, `session/cancel {"sessionId":"c2"}`, `session/cancel {"sessionId":"c3"}`,
		fmt.Sprintf(`session/prompt {"sessionId":%q,"prompt":[{"type":"text","text":"after"}]}`, sid),
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the agent got\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
}

// Handlers of both directions, busy at once, never run on two goroutines at
// the same time: a handler's code runs alone between its calls of next
// (C15). Run under -race.
func TestC15_HandlersOfBothDirectionsNeverRunAtOnce(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./alone.star"))`,
		"alone.star": `plug(name = "alone")
def work(ctx):
    ctx.state["in"] = ctx.state.get("in", 0) + 1
    if ctx.state["in"] != 1:
        fail("two handlers at once")
    n = 0
    for i in range(200):
        n += i
    ctx.state["count"] = ctx.state.get("count", 0) + 1
    ctx.state["in"] -= 1

def on_message(ctx, message, next):
    work(ctx)
    r = next(message)
    work(ctx)
    return r

def on_session(ctx, next):
    info = next()
    print("COUNT", ctx.state.get("count", 0) > 400)
    return info
`,
	}, chain.Options{})
	sid := s.Open(s.c.dir)
	s.Prompt(3, sid, "/chunks 300")
	// Notifications toward the agent while the turn streams toward the client.
	for range 200 {
		s.Send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"elsewhere"}}`)
	}
	before, resp := s.Until(acptest.ResponseTo("3"))
	if len(acptest.Chunks(before)) != 300 || resp.Error != nil {
		t.Fatalf("%d chunks, response %s\n%s", len(acptest.Chunks(before)), resp.Raw, s.c.logs.String())
	}
	s.run.Stop(lifecycle.Stop{Reason: "closed"})
	res := waitResult(t, s)
	if res.Pause.Reason != "closed" || strings.Join(s.c.lines("COUNT "), "") != "True" {
		t.Fatalf("pause %+v, count %q\n%s", res.Pause, s.c.lines("COUNT "), s.c.logs.String())
	}
}

// TestC3_AgentNotAnsweringInitializeFailsAtTheStartupLimit: an agent that
// never answers initialize fails the run at the startup limit, and the error
// names that limit.
func TestC3_AgentNotAnsweringInitializeFailsAtTheStartupLimit(t *testing.T) {
	s := startSession(t, map[string]string{
		"blaise.star": `agent(command = "sh", args = ["-c", "cat >/dev/null"])
`,
	}, chain.Options{StartupLimit: 100 * time.Millisecond})
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	res := waitResult(t, s)
	if res.Pause == nil || res.Pause.Reason != "failed" || res.Pause.Err == nil ||
		!strings.Contains(res.Pause.Err.Error(), "the agent did not answer initialize within 100ms (the startup limit, --startup-limit)") {
		t.Fatalf("pause %+v", res.Pause)
	}
}
