package front

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// testClient is a raw ACP client of a Server.
type testClient struct {
	*acptest.Client
	t    *testing.T
	in   *io.PipeWriter
	done chan error
	dir  string
}

func startServer(t *testing.T, f *fakeSessions, with ...func(*Server)) *testClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := &Server{
		Sessions:        f,
		Config:          "/cfg/blaise.star",
		In:              inR,
		Out:             outW,
		Log:             log.New(io.Discard),
		ShutdownTimeout: 10 * time.Second,
	}
	for _, w := range with {
		w(srv)
	}
	c := &testClient{t: t, in: inW, done: make(chan error, 1), dir: t.TempDir()}
	c.Client = &acptest.Client{T: t, In: acptest.Read(outR, nil), Out: acptest.WriteLines(inW), Timeout: 20 * time.Second}
	go func() {
		err := srv.Run(context.Background())
		outW.Close()
		c.done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	return c
}

func (c *testClient) send(format string, args ...any) {
	c.t.Helper()
	c.Send(fmt.Sprintf(format, args...))
}

// await reads up to the response with id, answering permission requests
// with allow_once; it returns what came before the response.
func (c *testClient) await(id string) (before []*acp.Message, resp *acp.Message) {
	c.t.Helper()
	for {
		m := c.Next()
		if m.Kind == acp.Response && string(m.ID) == id {
			return before, m
		}
		if m.Kind == acp.Request && m.Method == "session/request_permission" {
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, m.ID)
		}
		before = append(before, m)
	}
}

func (c *testClient) initialize() *acp.Message {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	_, resp := c.await("0")
	return resp
}

func (c *testClient) newSession(id int) string {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, id, c.dir)
	_, resp := c.await(fmt.Sprint(id))
	sid, ok := stringMember(resp.Result, "sessionId")
	if !ok {
		c.t.Fatalf("session/new: %s", resp.Raw)
	}
	return sid
}

func (c *testClient) prompt(id int, sid, text string) ([]*acp.Message, *acp.Message) {
	c.t.Helper()
	b, _ := json.Marshal(text)
	c.send(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, id, sid, b)
	return c.await(fmt.Sprint(id))
}

func (c *testClient) close() error {
	c.t.Helper()
	c.in.Close()
	for range c.In {
	}
	select {
	case err := <-c.done:
		return err
	case <-time.After(20 * time.Second):
		c.t.Fatal("the server did not return after the client left")
	}
	return nil
}

// TestInitializeAndListStartNoSession: a client that initializes, lists
// sessions and leaves starts nothing; the answer to initialize, with no
// earlier session to learn from, is the documented fixed set.
func TestInitializeAndListStartNoSession(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	resp := c.initialize()
	var r struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
			Session     struct {
				List *struct{} `json:"list"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AgentInfo struct {
			Name string `json:"name"`
		} `json:"agentInfo"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatal(err)
	}
	if !r.AgentCapabilities.LoadSession || r.AgentCapabilities.Session.List == nil || r.AgentInfo.Name != "blaise-agent" || r.ProtocolVersion != 1 {
		t.Fatalf("initialize result %s", resp.Result)
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	if _, resp = c.await("1"); string(resp.Result) != `{"sessions":[]}` {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"demo"}}`)
	if _, resp = c.await("2"); resp.Error != nil {
		t.Fatalf("authenticate: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"_demo/echo","params":{}}`)
	if _, resp = c.await("3"); !strings.Contains(string(resp.Error), "-32601") {
		t.Fatalf("an extension request with no agent running: %s", resp.Raw)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if runs := len(f.runs); runs != 0 || f.n != 0 {
		t.Fatalf("%d sessions, %d runs started", f.n, runs)
	}
}

// TestASessionNewNoAgentWouldTakeIsRefusedBeforeAnyRun: a session/new
// without cwd or mcpServers, or with a relative cwd, is answered Invalid
// params by the front end itself, saying what is wrong: no session is made
// and no run starts for it, so no plug makes and tears down a worktree
// for a request that could only fail.
func TestASessionNewNoAgentWouldTakeIsRefusedBeforeAnyRun(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	for i, tc := range []struct{ params, reason string }{
		{`{"mcpServers":[]}`, `"missing cwd"`},
		{`{"cwd":"relative/dir","mcpServers":[]}`, `"cwd must be an absolute path"`},
		{`{"cwd":"/"}`, `"missing mcpServers"`},
		{`{"cwd":7,"mcpServers":[]}`, `"cwd: want a string"`},
		{`{"cwd":"/","mcpServers":{}}`, `"mcpServers: want an array"`},
	} {
		id := fmt.Sprint(i + 1)
		c.send(`{"jsonrpc":"2.0","id":%s,"method":"session/new","params":%s}`, id, tc.params)
		if _, resp := c.await(id); !strings.Contains(string(resp.Error), `"code":-32602`) || !strings.Contains(string(resp.Error), tc.reason) {
			t.Errorf("session/new %s: %s, want Invalid params saying %s", tc.params, resp.Raw, tc.reason)
		}
	}
	if f.n != 0 || len(f.runs) != 0 {
		t.Fatalf("%d sessions, %d runs started for refused requests", f.n, len(f.runs))
	}
	// What ACP does not require is the agent's to judge: a kind of MCP
	// server this build does not know opens a session.
	c.send(`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"future","name":"x"}]}}`)
	if _, resp := c.await("9"); resp.Error != nil {
		t.Errorf("session/new with an MCP server of a newer kind: %s", resp.Raw)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
}

// TestASessionMethodWithoutSessionIdIsInvalidParams: a method of a session
// (session/prompt) sent without its sessionId is answered Invalid params,
// "sessionId is missing", as session/load is, whether or not a session is
// open: it reaches no run, where it went to the last session's (whose
// chain refused it as not found) or got Method not found.
func TestASessionMethodWithoutSessionIdIsInvalidParams(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	const noID = `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"}]}}`
	c.send(noID, 1)
	if _, resp := c.await("1"); !strings.Contains(string(resp.Error), `"code":-32602`) || !strings.Contains(string(resp.Error), "sessionId is missing") {
		t.Errorf("with no session: %s", resp.Raw)
	}
	a := c.newSession(2)
	c.send(noID, 3)
	if _, resp := c.await("3"); !strings.Contains(string(resp.Error), `"code":-32602`) || !strings.Contains(string(resp.Error), "sessionId is missing") {
		t.Errorf("with a session open: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":7,"prompt":[]}}`)
	if _, resp := c.await("4"); !strings.Contains(string(resp.Error), `"code":-32602`) || !strings.Contains(string(resp.Error), "sessionId: want a string") {
		t.Errorf("with a sessionId that is no string: %s", resp.Raw)
	}
	if got := f.run(a).methods(); got != "initialize,session/new" {
		t.Errorf("the open session's run saw %s", got)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
}

// TestASessionCancelSentAsARequestIsAnswered: session/cancel is a
// notification in ACP; a client that sends it as a request gets an answer
// where the front end takes it (a paused session: nothing runs, nothing
// resumes), as it does from a running session's agent: a request is never
// left without one.
func TestASessionCancelSentAsARequestIsAnswered(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	f.pauseIdle(t, a)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/cancel","params":{"sessionId":%q}}`, a)
	if _, resp := c.await("2"); resp.Error != nil || string(resp.Result) != "null" {
		t.Errorf("session/cancel of a paused session: %s", resp.Raw)
	}
	if runs := len(f.runs); runs != 1 {
		t.Errorf("%d runs: the cancel resumed the session", runs)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsHaveBlaiseIDsAndRunsOfTheirOwn(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a, b := c.newSession(1), c.newSession(2)
	if a != "bs01" || b != "bs02" {
		t.Fatalf("session ids %q %q, want the blaise ids", a, b)
	}
	msgs, resp := c.prompt(3, a, "hello a")
	if got := acptest.Texts(t, a, msgs); got != "echo: hello a" || !strings.Contains(string(resp.Result), "end_turn") {
		t.Fatalf("a: %q %s", got, resp.Raw)
	}
	msgs, _ = c.prompt(4, b, "hello b")
	if got := acptest.Texts(t, b, msgs); got != "echo: hello b" {
		t.Fatalf("b: %q", got)
	}
	// Each session has its own run; the second one got initialize again.
	if got := f.run(a).methods(); got != "initialize,session/new,session/prompt" {
		t.Fatalf("run of a saw %s", got)
	}
	if got := f.run(b).methods(); got != "initialize,session/new,session/prompt" {
		t.Fatalf("run of b saw %s", got)
	}
	if f.record(a).ACPSessionID == f.record(b).ACPSessionID {
		t.Fatal("two sessions share an ACP session")
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		if rec := f.record(id); rec.State != lifecycle.Paused || rec.Pause.Reason != "idle" {
			t.Fatalf("after the client left, %s is %s %+v (L9: stopped as idle)", id, rec.State, rec.Pause)
		}
	}
}

func TestAgentRequestsGetIDsOfTheConnection(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a, b := c.newSession(1), c.newSession(2)
	// Both agents ask for permission at once, with the same id of theirs.
	c.send(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission A"}]}}`, a)
	c.send(`{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission B"}]}}`, b)
	asks := map[string]*acp.Message{}
	for len(asks) < 2 {
		m := c.Next()
		if m.Kind == acp.Request {
			asks[string(m.ID)] = m
		}
	}
	sessionOf := map[string]string{}
	for id, m := range asks {
		sid, _ := stringMember(m.Params, "sessionId")
		sessionOf[id] = sid
	}
	if len(asks) != 2 || sessionOf["1"] == sessionOf["2"] || (sessionOf["1"] != a && sessionOf["1"] != b) {
		t.Fatalf("permission requests %v", sessionOf)
	}
	// Answer b's with reject, a's with allow.
	for id, sid := range sessionOf {
		opt := "allow_once"
		if sid == b {
			opt = "reject_once"
		}
		c.send(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, id, opt)
	}
	got := map[string]string{}
	var all []*acp.Message
	for len(got) < 2 {
		m := c.Next()
		all = append(all, m)
		if m.Kind == acp.Response {
			got[string(m.ID)] = string(m.Result)
		}
	}
	var as, bs []*acp.Message
	for _, m := range all {
		if sid, _ := stringMember(m.Params, "sessionId"); sid == a {
			as = append(as, m)
		} else {
			bs = append(bs, m)
		}
	}
	if acptest.Texts(t, a, as) != "permission: allow_once" || acptest.Texts(t, b, bs) != "permission: reject_once" {
		t.Fatalf("answers crossed: a %q, b %q", acptest.Texts(t, a, as), acptest.Texts(t, b, bs))
	}
	_ = c.close()
}

func TestIdleSessionResumesTransparently(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.prompt(2, a, "first")
	// The engine's inactivity timer stops the run.
	run1 := f.pauseIdle(t, a)

	msgs, resp := c.prompt(3, a, "second")
	if got := acptest.Texts(t, a, msgs); got != "echo: second" {
		for _, m := range msgs {
			t.Logf("%s", m.Raw)
		}
		t.Fatalf("after the resume: %q (the replayed history must not reach the client): %s", got, resp.Raw)
	}
	if resp.Error != nil {
		t.Fatalf("prompt: %s", resp.Raw)
	}
	run2 := f.run(a)
	if run2 == run1 || run2.num != 2 {
		t.Fatal("no resume run")
	}
	if got := run2.methods(); got != "initialize,session/load,session/prompt" {
		t.Fatalf("the resume run saw %s", got)
	}
	_ = c.close()
}

func TestMessageToAStoppingRunWaitsForTheNextRun(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	run1 := f.run(a)
	// The stop is recorded; the run has not ended yet when the prompt comes.
	run1.mu.Lock()
	run1.stopped = &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: "idle", MayResume: true}, Run: 1}
	run1.mu.Unlock()
	f.mu.Lock()
	f.recs[a].Stop = run1.stopped
	f.mu.Unlock()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"later"}]}}`, a)
	time.Sleep(50 * time.Millisecond)
	run1.in.Close() // now the run ends
	msgs, resp := c.await("5")
	if resp.Error != nil || acptest.Texts(t, a, msgs) != "echo: later" {
		t.Fatalf("prompt: %s %q", resp.Raw, acptest.Texts(t, a, msgs))
	}
	if strings.Contains(run1.methods(), "session/prompt") || f.run(a).num != 2 {
		t.Fatalf("the prompt went to the stopping run: %s", run1.methods())
	}
	_ = c.close()
}

func TestClientLoadOfAPausedSessionReplaysHistory(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.prompt(2, a, "remember me")
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if f.record(a).State != lifecycle.Paused {
		t.Fatal("not paused")
	}

	// A new connection loads it.
	c = startServer(t, f)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, a, c.dir)
	msgs, resp := c.await("1")
	if resp.Error != nil {
		t.Fatalf("load: %s", resp.Raw)
	}
	if got := acptest.Texts(t, a, msgs); got != "> remember me|echo: remember me" {
		t.Fatalf("replay %q", got)
	}
	msgs, _ = c.prompt(2, a, "again")
	if got := acptest.Texts(t, a, msgs); got != "echo: again" {
		t.Fatalf("after load: %q", got)
	}
	if run := f.run(a); run.num != 2 || run.methods() != "initialize,session/load,session/prompt" {
		t.Fatalf("run %d saw %s", run.num, run.methods())
	}
	_ = c.close()
}

func TestUnknownAndEndedSessionsAreNotFound(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	_, resp := c.prompt(1, "nope", "hi")
	if resp.Error == nil || !strings.Contains(string(resp.Error), "-32002") {
		t.Fatalf("unknown session: %s", resp.Raw)
	}
	a := c.newSession(2)
	f.run(a).Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	f.run(a).wait(10 * time.Second)
	testsupport.Eventually(t, "the session to be ended", func() bool { return f.record(a).State == lifecycle.Ended })
	_, resp = c.prompt(3, a, "hi")
	if resp.Error == nil || !strings.Contains(string(resp.Error), "-32002") {
		t.Fatalf("ended session: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":%q,"cwd":"/","mcpServers":[]}}`, a)
	if _, resp = c.await("4"); resp.Error == nil {
		t.Fatalf("load of an ended session: %s", resp.Raw)
	}
	_ = c.close()
}

// TestACrashedRunAnswersItsRequestsAndOthersGoOn: the crashed run's
// prompt gets an error, the other session goes on, the crashed one
// resumes at its next prompt, and the front end's log (the editor's) says
// why the run failed, as sessions show does.
func TestACrashedRunAnswersItsRequestsAndOthersGoOn(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	logs := new(testsupport.Buffer)
	c := startServer(t, f, func(s *Server) { s.Log = log.New(logs) })
	c.initialize()
	a, b := c.newSession(1), c.newSession(2)
	_, resp := c.prompt(3, a, "/exit 3")
	if resp.Error == nil || !strings.Contains(string(resp.Error), "ended before answering") {
		t.Fatalf("prompt of a crashed run: %s", resp.Raw)
	}
	pause := f.record(a).Pause
	if pause == nil || pause.Error == "" {
		t.Fatalf("the crashed run's pause: %+v", pause)
	}
	// The line is logged as the run ends, which the prompt's answer may
	// come before.
	want := "session paused session=" + a + " run=1 reason=failed err="
	if !testsupport.Wait(func() bool { return strings.Contains(logs.String(), want) }) {
		t.Errorf("the log does not say %q:\n%s", want, logs)
	}
	msgs, _ := c.prompt(4, b, "still here")
	if got := acptest.Texts(t, b, msgs); got != "echo: still here" {
		t.Fatalf("b: %q", got)
	}
	// The crashed session paused (failed) and resumes on the next prompt.
	msgs, _ = c.prompt(5, a, "back")
	if got := acptest.Texts(t, a, msgs); got != "echo: back" {
		t.Fatalf("a after the crash: %q", got)
	}
	_ = c.close()
}

// TestStartFailureAnswersSessionNewWithTheCause: a session that
// cannot start fails the client's session/new with the reason, and
// initialize is not concerned.
func TestStartFailureAnswersSessionNewWithTheCause(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	f.startErr = fmt.Errorf("blaise.star:3:1: undefined: sertup")
	c := startServer(t, f)
	if resp := c.initialize(); resp.Error != nil {
		t.Fatalf("initialize: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if _, resp := c.await("1"); !strings.Contains(string(resp.Error), "blaise.star:3:1: undefined: sertup") {
		t.Fatalf("session/new: %s", resp.Raw)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelAndExtensionsPassThrough(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/slow 50\n/chunks 100"}]}}`, a)
	for {
		m := c.Next()
		if m.Method == "session/update" {
			break
		}
	}
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, a)
	_, resp := c.await("2")
	if !strings.Contains(string(resp.Result), `"cancelled"`) {
		t.Fatalf("cancelled prompt: %s", resp.Raw)
	}
	msgs, _ := c.prompt(3, a, "/ext hi")
	found := false
	for _, m := range msgs {
		if m.Method == "_demo/ping" {
			sid, _ := stringMember(m.Params, "sessionId")
			found = sid == a && strings.Contains(string(m.Raw), `"text":"hi"`)
		}
	}
	if !found {
		t.Fatalf("extension notification: %v", msgs)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"_demo/echo","params":{"x":[1,2,{"_meta":{"k":"v"}}]}}`)
	if _, resp = c.await("4"); string(resp.Result) != `{"x":[1,2,{"_meta":{"k":"v"}}]}` {
		t.Fatalf("extension request: %s", resp.Raw)
	}
	_ = c.close()
}

func TestSessionListIsAnsweredFromTheStore(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.prompt(2, a, "x")
	f.mu.Lock()
	f.recs[a].Title = "fix the flaky test" // as its run reports it
	f.mu.Unlock()
	c.send(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	_, resp := c.await("3")
	var r struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Title     string `json:"title"`
		} `json:"sessions"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	if len(r.Sessions) != 1 || r.Sessions[0].SessionID != a || r.Sessions[0].Title != "fix the flaky test" {
		t.Fatalf("list: %s", resp.Raw)
	}
	if got := f.run(a).methods(); strings.Contains(got, "session/list") {
		t.Fatalf("the agent was asked: %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"/elsewhere"}}`)
	if _, resp = c.await("4"); string(resp.Result) != `{"sessions":[]}` {
		t.Fatalf("list of another cwd: %s", resp.Raw)
	}
	_ = c.close()
}

// TestANewSessionStartsBeforeEarlierSessionsAreSettled: session/new needs
// no earlier session settled, and the settling starts once the agent has
// answered it, not beside its start; the messages of the new session do not
// wait for it either, but what may concern earlier sessions does.
func TestANewSessionStartsBeforeEarlierSessionsAreSettled(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	settled, asked := make(chan struct{}), make(chan struct{})
	c := startServer(t, f, func(s *Server) {
		s.Settled = settled
		s.Settle = func() {
			if f.run("bs01") == nil {
				t.Error("the settling started before the new session's run")
			}
			close(asked)
		}
	})
	c.initialize()
	a := c.newSession(1)
	<-asked
	if _, resp := c.prompt(2, a, "hi"); resp.Error != nil {
		t.Fatalf("prompt of the new session: %s", resp.Raw)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"again"}]}}`, a)
	time.Sleep(50 * time.Millisecond) // long enough for an answer, were it not waiting
	select {
	case m := <-c.In:
		t.Fatalf("answered before the earlier sessions were settled: %s", m.Raw)
	default:
	}
	close(settled)
	if _, resp := c.await("3"); resp.Error != nil {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	if _, resp := c.await("4"); resp.Error != nil {
		t.Fatalf("prompt: %s", resp.Raw)
	}
	_ = c.close()
}

// TestEarlierSessionsAreSettledWhenTheClientAsksForNothing: a client that
// says hello and waits still has the earlier sessions settled (their
// expiries and teardowns go on, L6), a second after the server started.
func TestEarlierSessionsAreSettledWhenTheClientAsksForNothing(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	asked := make(chan struct{})
	c := startServer(t, f, func(s *Server) {
		s.Settled = make(chan struct{})
		s.Settle = func() { close(asked) }
	})
	c.initialize()
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the earlier sessions were never settled")
	}
	_ = c.close()
}

// checkedSessions are sessions that must not be asked for, once armed,
// before settled is closed. (Initialize may list them: it reads their
// transcripts for the chain's answer to initialize.)
type checkedSessions struct {
	*fakeSessions
	t       *testing.T
	armed   *atomic.Bool
	settled <-chan struct{}
}

func (s checkedSessions) check(what string) {
	if !s.armed.Load() {
		return
	}
	select {
	case <-s.settled:
	default:
		s.t.Errorf("%s reached the sessions before they were settled", what)
	}
}

func (s checkedSessions) Start(ctx context.Context, config, dir string) (Run, error) {
	s.check("session/new")
	return s.fakeSessions.Start(ctx, config, dir)
}

func (s checkedSessions) List(ctx context.Context) ([]*lifecycle.Record, error) {
	s.check("session/list")
	return s.fakeSessions.List(ctx)
}

// TestSessionMessagesWaitUntilEarlierSessionsAreSettled: initialize is
// answered while the sessions of earlier front ends are being settled;
// what asks for sessions waits for it, and is then answered.
func TestSessionMessagesWaitUntilEarlierSessionsAreSettled(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	settled, armed := make(chan struct{}), new(atomic.Bool)
	c := startServer(t, f, func(s *Server) {
		s.Settled = settled
		s.Sessions = checkedSessions{fakeSessions: f, t: t, armed: armed, settled: settled}
	})
	c.initialize()
	armed.Store(true)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, c.dir)
	// Long enough for the server to have taken them, were it not waiting.
	time.AfterFunc(50*time.Millisecond, func() { close(settled) })
	if _, resp := c.await("1"); resp.Error != nil {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	if _, resp := c.await("2"); resp.Error != nil {
		t.Fatalf("session/new: %s", resp.Raw)
	}
	_ = c.close()
}

func TestPipelinedRequestsWaitForInitialize(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, c.dir)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"unknown","prompt":[]}}`)
	got := map[string]*acp.Message{}
	for len(got) < 3 {
		m := c.Next()
		got[string(m.ID)] = m
	}
	if got["0"].Error != nil || got["1"].Error != nil || !strings.Contains(string(got["2"].Error), "-32002") {
		t.Fatalf("answers: %s %s %s", got["0"].Raw, got["1"].Raw, got["2"].Raw)
	}
	if run := f.run("bs01"); run.methods() != "initialize,session/new" {
		t.Fatalf("run saw %s", run.methods())
	}
	_ = c.close()
}

// A client that closes its input still gets the answers of what it asked;
// the agents' requests it can no longer answer are answered for it, and
// then the sessions stop as idle (L9).
func TestClosedInputAnswersWhatIsInFlightThenPauses(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission\nafter"}]}}`, a)
	for {
		if m := c.Next(); m.Kind == acp.Request {
			break // the permission request: the client leaves without answering
		}
	}
	c.in.Close()
	var msgs []*acp.Message
	var resp *acp.Message
	for m := range c.In {
		if m.Kind == acp.Response && string(m.ID) == "2" {
			resp = m
		} else {
			msgs = append(msgs, m)
		}
	}
	if resp == nil || !strings.Contains(string(resp.Result), "end_turn") {
		t.Fatalf("the prompt was not answered: %v", resp)
	}
	if got := acptest.Texts(t, a, msgs); got != "permission: cancelled|echo: after" {
		t.Fatalf("chunks %q", got)
	}
	if err := <-c.done; err != nil {
		t.Fatal(err)
	}
	if rec := f.record(a); rec.State != lifecycle.Paused || rec.Stop == nil || rec.Stop.Reason != "idle" {
		t.Fatalf("record %+v", rec)
	}
	if f.liveRuns() != 0 {
		t.Fatal("runs left behind")
	}
}

func TestAuthenticateIsReplayedToLaterRuns(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"demo"}}`)
	if _, resp := c.await("1"); resp.Error != nil {
		t.Fatalf("authenticate: %s", resp.Raw)
	}
	a, b := c.newSession(2), c.newSession(3)
	if got := f.run(a).methods(); got != "initialize,authenticate,session/new" {
		t.Fatalf("first run saw %s", got)
	}
	if got := f.run(b).methods(); got != "initialize,authenticate,session/new" {
		t.Fatalf("second run saw %s", got)
	}
	_ = c.close()
}

func TestCloseOfASessionPausesIt(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":%q}}`, a)
	if _, resp := c.await("2"); resp.Error != nil {
		t.Fatalf("close: %s", resp.Raw)
	}
	if !f.run(a).wait(10 * time.Second) {
		t.Fatal("the run goes on after session/close")
	}
	testsupport.Eventually(t, "the session to be paused", func() bool { return f.record(a).State == lifecycle.Paused })
	// Closing it again answers without a run.
	c.send(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":%q}}`, a)
	if _, resp := c.await("3"); resp.Error != nil || f.run(a).num != 1 {
		t.Fatalf("close of a paused session: %s", resp.Raw)
	}
	// It can be loaded again.
	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, a, c.dir)
	if _, resp := c.await("4"); resp.Error != nil {
		t.Fatalf("load: %s", resp.Raw)
	}
	_ = c.close()
}

func TestAgentCancelRequestIsMapped(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 5 s for the demo agent to give up on a permission request")
	}
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	// A permission request the client never answers: after the turn is
	// cancelled the demo agent waits 5 s, then sends $/cancel_request.
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission"}]}}`, a)
	var ask *acp.Message
	for ask == nil {
		if m := c.Next(); m.Kind == acp.Request {
			ask = m
		}
	}
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, a)
	cancelled, answered := false, false
	for !cancelled || !answered {
		m := c.Next()
		switch {
		case m.Method == "$/cancel_request":
			if got := string(memberValue(m.Params, "requestId")); got != string(ask.ID) {
				t.Fatalf("$/cancel_request names %s, the request was %s", got, ask.ID)
			}
			cancelled = true
		case m.Kind == acp.Response:
			answered = true
		}
	}
	_ = c.close()
}

func TestCancelOfAPromptWaitingForItsRun(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	_ = f.run(a).StopIdle()
	f.run(a).wait(10 * time.Second)
	testsupport.Eventually(t, "the session to be paused", func() bool { return f.record(a).State == lifecycle.Paused })
	// The prompt starts a resume run; the cancel comes before or after the
	// run is ready: either way the prompt ends cancelled.
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/sleep 5000\nlate"}]}}`, a)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, a)
	msgs, resp := c.await("2")
	if string(resp.Result) != `{"stopReason":"cancelled"}` || acptest.Texts(t, a, msgs) != "" {
		t.Fatalf("prompt: %s %q", resp.Raw, acptest.Texts(t, a, msgs))
	}
	_ = c.close()
}

// TestBundledUpdatesPassThroughAndAreSwallowedInAResume: a run
// whose session/updates come in bundles (blaise-agent acp's) shows them
// to the client with the blaise id, and the history a transparent resume
// replays stays hidden, as with updates one by one.
func TestBundledUpdatesPassThroughAndAreSwallowedInAResume(t *testing.T) {
	f := newFakeSessions(t.TempDir())
	f.bundled = true
	c := startServer(t, f)
	c.initialize()
	a := c.newSession(1)
	msgs, _ := c.prompt(2, a, "/chunks 50")
	if n := len(msgs); n < 50 {
		t.Fatalf("%d messages, want the 50 chunks", n)
	}
	for _, m := range msgs {
		if sid, _ := stringMember(m.Params, "sessionId"); m.Method == "session/update" && sid != a {
			t.Fatalf("an update of session %q, want %q: %s", sid, a, m.Raw)
		}
	}
	f.pauseIdle(t, a)
	msgs, resp := c.prompt(3, a, "second")
	if got := acptest.Texts(t, a, msgs); got != "echo: second" || resp.Error != nil {
		t.Fatalf("after the resume: %q (the replayed history must not reach the client): %s", got, resp.Raw)
	}
	_ = c.close()
}
