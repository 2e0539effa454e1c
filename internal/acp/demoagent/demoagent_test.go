package demoagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	acp "github.com/coder/acp-go-sdk"
)

// ---- test client ----

type testClient struct {
	mu        sync.Mutex
	updates   []acp.SessionNotification
	exts      []string
	files     map[string]string // served by fs/read_text_file
	written   map[string]string // from fs/write_text_file
	calls     []string          // permission and terminal requests, in order
	perms     []acp.RequestPermissionRequest
	onPerm    func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)
	blockWait bool // terminal/wait_for_exit blocks until cancelled
}

func newTestClient() *testClient {
	return &testClient{files: map[string]string{}, written: map[string]string{}}
}

var _ acp.Client = (*testClient)(nil)

func (c *testClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	content, ok := c.files[p.Path]
	if !ok {
		return acp.ReadTextFileResponse{}, &acp.RequestError{Code: -32002, Message: "Resource not found"}
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (c *testClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[p.Path] = p.Content
	return acp.WriteTextFileResponse{}, nil
}

func (c *testClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.perms = append(c.perms, p)
	c.calls = append(c.calls, "permission")
	on := c.onPerm
	c.mu.Unlock()
	if on != nil {
		return on(ctx, p)
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected("allow_once")}, nil
}

func (c *testClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

func (c *testClient) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cwd := ""
	if p.Cwd != nil {
		cwd = *p.Cwd
	}
	c.calls = append(c.calls, fmt.Sprintf("create %s %q cwd=%s", p.Command, p.Args, cwd))
	return acp.CreateTerminalResponse{TerminalId: "term-1"}, nil
}

func (c *testClient) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "kill "+p.TerminalId)
	return acp.KillTerminalResponse{}, nil
}

func (c *testClient) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "output "+p.TerminalId)
	return acp.TerminalOutputResponse{Output: "ran it", ExitStatus: &acp.TerminalExitStatus{ExitCode: acp.Ptr(0)}}, nil
}

func (c *testClient) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "release "+p.TerminalId)
	return acp.ReleaseTerminalResponse{}, nil
}

func (c *testClient) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	c.mu.Lock()
	c.calls = append(c.calls, "wait "+p.TerminalId)
	block := c.blockWait
	c.mu.Unlock()
	if block {
		<-ctx.Done() // the agent's $/cancel_request cancels this handler
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	}
	return acp.WaitForTerminalExitResponse{ExitCode: acp.Ptr(0)}, nil
}

func (c *testClient) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exts = append(c.exts, method+" "+string(params))
	return nil, nil
}

func (c *testClient) numUpdates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.updates)
}

// described returns the updates from index from on, as short strings.
func (c *testClient) described(from int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.updates[from:] {
		out = append(out, describeUpdate(n.Update))
	}
	return out
}

func (c *testClient) callLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func blockText(b acp.ContentBlock) string {
	if b.Text != nil {
		return b.Text.Text
	}
	return "<non-text>"
}

func describeUpdate(u acp.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return "user: " + blockText(u.UserMessageChunk.Content)
	case u.AgentMessageChunk != nil:
		return "agent: " + blockText(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		return "thought: " + blockText(u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		return fmt.Sprintf("tool_call %s %s %s", u.ToolCall.ToolCallId, u.ToolCall.Title, u.ToolCall.Status)
	case u.ToolCallUpdate != nil:
		st := ""
		if u.ToolCallUpdate.Status != nil {
			st = string(*u.ToolCallUpdate.Status)
		}
		return fmt.Sprintf("tool_call_update %s %s", u.ToolCallUpdate.ToolCallId, st)
	case u.Plan != nil:
		var items []string
		for _, e := range u.Plan.Entries {
			items = append(items, e.Content)
		}
		return "plan: " + strings.Join(items, " | ")
	}
	return "other"
}

// ---- harness ----

// teeWriter records everything the agent writes, in write order.
type teeWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf.Write(p)
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *teeWriter) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Split(strings.TrimRight(t.buf.String(), "\n"), "\n")
}

type harness struct {
	t       *testing.T
	client  *testClient
	conn    *acp.ClientSideConnection
	toAgent *io.PipeWriter
	wire    *teeWriter
	log     *testsupport.Buffer
	done    chan struct{} // closed when Run has returned
	runErr  error         // Run's result, once done is closed
	cancel  context.CancelFunc
}

// start runs an agent (Run) on a fresh pair of pipes, as a new process would.
func start(t *testing.T, stateDir string, opts ...func(*Options, *testClient)) *harness {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	tc := newTestClient()
	h := &harness{t: t, client: tc, toAgent: c2aW, wire: &teeWriter{w: a2cW}, log: &testsupport.Buffer{}, done: make(chan struct{})}
	o := Options{StateDir: stateDir, Log: h.log}
	for _, f := range opts {
		f(&o, tc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.runErr = Run(ctx, c2aR, h.wire, o)
		a2cW.Close()
		close(h.done)
	}()
	h.conn = acp.NewClientSideConnection(tc, c2aW, a2cR)
	h.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		h.close()
		cancel()
		a2cR.Close()
		c2aR.Close()
	})
	return h
}

// close hangs up (closes the agent's input) and returns Run's error.
func (h *harness) close() error {
	h.toAgent.Close()
	return h.wait()
}

// wait returns Run's error once it has returned.
func (h *harness) wait() error {
	select {
	case <-h.done:
		return h.runErr
	case <-time.After(5 * time.Second):
		h.t.Fatalf("Run did not return")
		return nil
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) initialize() acp.InitializeResponse {
	h.t.Helper()
	resp, err := h.conn.Initialize(ctxT(h.t), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
	})
	if err != nil {
		h.t.Fatalf("initialize: %v", err)
	}
	return resp
}

func (h *harness) newSession(cwd string) acp.SessionId {
	h.t.Helper()
	resp, err := h.conn.NewSession(ctxT(h.t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		h.t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

func (h *harness) prompt(sid acp.SessionId, blocks ...acp.ContentBlock) (acp.PromptResponse, error) {
	return h.conn.Prompt(ctxT(h.t), acp.PromptRequest{SessionId: sid, Prompt: blocks})
}

// run sends a text prompt and returns the updates of its turn.
func (h *harness) run(sid acp.SessionId, text string) (acp.StopReason, []string) {
	h.t.Helper()
	from := h.client.numUpdates()
	resp, err := h.prompt(sid, acp.TextBlock(text))
	if err != nil {
		h.t.Fatalf("prompt %q: %v", text, err)
	}
	return resp.StopReason, h.client.described(from)
}

func errCode(err error) int {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---- tests ----

func TestInitialize(t *testing.T) {
	h := start(t, t.TempDir())
	resp := h.initialize()
	if resp.ProtocolVersion != acp.ProtocolVersionNumber {
		t.Errorf("protocolVersion = %d, want %d", resp.ProtocolVersion, acp.ProtocolVersionNumber)
	}
	if !resp.AgentCapabilities.LoadSession {
		t.Errorf("loadSession not advertised")
	}
	if resp.AgentInfo == nil || resp.AgentInfo.Name != DefaultName || resp.AgentInfo.Version != Version {
		t.Errorf("agentInfo = %+v", resp.AgentInfo)
	}
	if err := h.close(); err != nil {
		t.Errorf("Run after EOF = %v, want nil", err)
	}

	h2 := start(t, t.TempDir(), func(o *Options, _ *testClient) { o.Name = "other-name" })
	if got := h2.initialize().AgentInfo.Name; got != "other-name" {
		t.Errorf("agentInfo.name = %q", got)
	}
}

func TestEchoAndSessionIDs(t *testing.T) {
	dir := t.TempDir()
	cwd := t.TempDir()
	h := start(t, dir)
	h.initialize()
	s1 := h.newSession(cwd)
	s2 := h.newSession(cwd)
	if s1 != "sess-1" || s2 != "sess-2" {
		t.Fatalf("session ids = %q, %q; want sess-1, sess-2", s1, s2)
	}

	reason, ups := h.run(s1, "hello")
	if reason != acp.StopReasonEndTurn || !equal(ups, []string{"agent: echo: hello"}) {
		t.Errorf("echo: %s %q", reason, ups)
	}
	_, ups = h.run(s1, "a\n\n  b\r\n")
	if !equal(ups, []string{"agent: echo: a", "agent: echo:   b"}) {
		t.Errorf("multi-line echo: %q", ups)
	}
	_, ups = h.run(s1, "")
	if !equal(ups, []string{"agent: echo: "}) {
		t.Errorf("empty prompt: %q", ups)
	}

	if _, err := os.Stat(filepath.Join(dir, "sessions", "sess-1.json")); err != nil {
		t.Errorf("session file: %v", err)
	}
	if _, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}}); errCode(err) != -32602 {
		t.Errorf("relative cwd: err = %v, want -32602", err)
	}
	if _, err := h.prompt("sess-404", acp.TextBlock("x")); errCode(err) != -32002 {
		t.Errorf("prompt in unknown session: err = %v, want -32002", err)
	}
	if !strings.Contains(h.log.String(), "session created") {
		t.Errorf("log lacks session creation: %s", h.log.String())
	}
}

func TestCommands(t *testing.T) {
	cwd := t.TempDir()
	t.Setenv("DEMOAGENT_TEST_VAR", "forty two")
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(cwd)
	h.client.mu.Lock()
	h.client.files[filepath.Join(cwd, "notes.txt")] = "hi there"
	h.client.mu.Unlock()
	wd, _ := os.Getwd()
	// /dial reaches a listener, and is refused where none listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := gone.Addr().String()
	gone.Close()

	// Cases run in order in one session: tool call ids count up.
	cases := []struct {
		prompt string
		want   []string // a trailing "*" matches a prefix
	}{
		{"/think pondering", []string{"thought: pondering"}},
		{"/plan a; b;; c ", []string{"plan: a | b | c"}},
		{"/tool grep", []string{"tool_call call-1 grep pending", "tool_call_update call-1 completed"}},
		{"/permission", []string{"agent: permission: allow_once"}},
		{"/read notes.txt", []string{"agent: read " + filepath.Join(cwd, "notes.txt") + ": hi there"}},
		{"/read /nonexistent/x", []string{"agent: read /nonexistent/x: error: Resource not found (-32002)*"}},
		{`/write out.txt line1\nline2`, []string{"agent: write " + filepath.Join(cwd, "out.txt") + ": ok"}},
		{"/terminal echo hi  there", []string{"agent: terminal echo hi there: exit 0\nran it"}},
		{"/chunks 3", []string{"agent: chunk 1", "agent: chunk 2", "agent: chunk 3"}},
		{"/chunks x", []string{"agent: chunks: error:*"}},
		{"/big 101m", []string{"agent: big: error:*"}},
		{"/env DEMOAGENT_TEST_VAR\n/env DEMOAGENT_SURELY_UNSET_VAR", []string{"agent: DEMOAGENT_TEST_VAR=forty two", "agent: DEMOAGENT_SURELY_UNSET_VAR unset"}},
		{"/create made.txt a\\nb", []string{"agent: create " + filepath.Join(cwd, "made.txt") + ": ok"}},
		{"/create /nonexistent/x y", []string{"agent: create /nonexistent/x: error: open /nonexistent/x: no such file or directory"}},
		{"/dial " + ln.Addr().String(), []string{"agent: dial " + ln.Addr().String() + ": ok"}},
		{"/dial " + closed, []string{"agent: dial " + closed + ": error: dial tcp " + closed + ": connect: connection refused"}},
		{"/cwd", []string{"agent: session cwd: " + cwd + "\nprocess cwd: " + wd}},
		{"/ext hello", []string{"agent: ext: sent _demo/ping"}},
		{"/nope x\n/thinking", []string{"agent: echo: /nope x", "agent: echo: /thinking"}},
		{"/sleep 5\nafter", []string{"agent: echo: after"}},
		{"one\n  /think t\ntwo\n/tool\n", []string{"agent: echo: one", "thought: t", "agent: echo: two", "tool_call call-3 demo-tool pending", "tool_call_update call-3 completed"}},
		{"/help", []string{"agent: demo agent commands*"}},
	}
	for _, c := range cases {
		reason, got := h.run(sid, c.prompt)
		if reason != acp.StopReasonEndTurn {
			t.Errorf("%q: stopReason %s", c.prompt, reason)
		}
		ok := len(got) == len(c.want)
		for i := 0; ok && i < len(got); i++ {
			if w, prefix := strings.CutSuffix(c.want[i], "*"); prefix {
				ok = strings.HasPrefix(got[i], w)
			} else {
				ok = got[i] == w
			}
		}
		if !ok {
			t.Errorf("%q:\n got %q\nwant %q", c.prompt, got, c.want)
		}
	}

	h.client.mu.Lock()
	if b, err := os.ReadFile(filepath.Join(cwd, "made.txt")); err != nil || string(b) != "a\nb" {
		t.Errorf("made.txt = %q, %v; want the text /create wrote", b, err)
	}
	if w := h.client.written[filepath.Join(cwd, "out.txt")]; w != "line1\nline2" {
		t.Errorf("written = %q", w)
	}
	if len(h.client.perms) != 1 || len(h.client.perms[0].Options) != 2 ||
		h.client.perms[0].Options[0].OptionId != "allow_once" || h.client.perms[0].Options[1].Kind != acp.PermissionOptionKindRejectOnce ||
		h.client.perms[0].ToolCall.ToolCallId != "call-2" {
		t.Errorf("permission requests = %+v", h.client.perms)
	}
	if len(h.client.exts) != 1 || !strings.HasPrefix(h.client.exts[0], "_demo/ping ") || !strings.Contains(h.client.exts[0], `"text":"hello"`) {
		t.Errorf("extension notifications = %q", h.client.exts)
	}
	h.client.mu.Unlock()
	wantCalls := []string{"permission", fmt.Sprintf("create echo [\"hi\" \"there\"] cwd=%s", cwd), "wait term-1", "output term-1", "release term-1"}
	if got := h.client.callLog(); !equal(got, wantCalls) {
		t.Errorf("client calls:\n got %q\nwant %q", got, wantCalls)
	}

	// Permission rejected.
	h.client.mu.Lock()
	h.client.onPerm = func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected("reject_once")}, nil
	}
	h.client.mu.Unlock()
	if _, got := h.run(sid, "/permission"); !equal(got, []string{"agent: permission: reject_once"}) {
		t.Errorf("rejected permission: %q", got)
	}

	// /big: exact size and pattern. (Sizes stay small: the SDK's JSON
	// handling costs about 1 s per MiB under the race detector.)
	for _, n := range []int{0, 1000, 256 << 10} {
		from := h.client.numUpdates()
		if _, err := h.prompt(sid, acp.TextBlock(fmt.Sprintf("/big %d", n))); err != nil {
			t.Fatalf("/big %d: %v", n, err)
		}
		h.client.mu.Lock()
		ups := h.client.updates[from:]
		h.client.mu.Unlock()
		if len(ups) != 1 || ups[0].Update.AgentMessageChunk == nil {
			t.Fatalf("/big %d: %d updates", n, len(ups))
		}
		text := ups[0].Update.AgentMessageChunk.Content.Text.Text
		if len(text) != n || (n > 40 && text[36:40] != "abcd") {
			t.Errorf("/big %d: got %d bytes starting %.40q", n, len(text), text)
		}
	}

	// /slow delays each following update.
	begin := time.Now()
	if _, got := h.run(sid, "/slow 30\n/chunks 3"); len(got) != 3 {
		t.Errorf("/slow: %q", got)
	}
	if d := time.Since(begin); d < 90*time.Millisecond {
		t.Errorf("/slow 30 with 3 chunks took %v", d)
	}

	// Non-text blocks are described, in order with the text.
	from := h.client.numUpdates()
	_, err = h.prompt(sid, acp.ImageBlock("aGVsbG8=", "image/png"), acp.TextBlock("x"), acp.ResourceLinkBlock("f", "file:///tmp/f"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///r", Text: "abc"}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"agent: image: image/png, 8 bytes of base64", "agent: echo: x", "agent: resource_link: file:///tmp/f", "agent: resource: file:///r, 3 bytes of text"}
	if got := h.client.described(from); !equal(got, want) {
		t.Errorf("blocks:\n got %q\nwant %q", got, want)
	}

	// /fail: updates before it arrive, then the error; later lines are not run.
	from = h.client.numUpdates()
	_, err = h.prompt(sid, acp.TextBlock("before\n/fail boom\nafter"))
	if errCode(err) != -32603 || !strings.Contains(err.Error(), "boom") {
		t.Errorf("/fail: err = %v", err)
	}
	if got := h.client.described(from); !equal(got, []string{"agent: echo: before"}) {
		t.Errorf("/fail updates: %q", got)
	}
}

// TestAskCarriesKindAndTarget: /ask sends a permission request shaped as
// real agents send them (for blaise:permissions' rules): the
// tool's kind, an execute call's command in rawInput, another call's paths
// in locations, joined to the cwd but not cleaned.
func TestAskCarriesKindAndTarget(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession("/ws")
	_, got := h.run(sid, "/ask move ../x.txt /y\n/ask execute git push --force\n/ask read")
	want := []string{"agent: permission: allow_once", "agent: permission: allow_once", "agent: ask: error: want /ask KIND TARGET"}
	if !equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	if len(h.client.perms) != 2 {
		t.Fatalf("permission requests = %+v", h.client.perms)
	}
	move, exec := h.client.perms[0].ToolCall, h.client.perms[1].ToolCall
	if *move.Kind != acp.ToolKindMove || len(move.Locations) != 2 || move.Locations[0].Path != "/ws/../x.txt" || move.Locations[1].Path != "/y" || len(h.client.perms[0].Options) != 4 {
		t.Errorf("move request = %+v", h.client.perms[0])
	}
	if *exec.Kind != acp.ToolKindExecute || len(exec.Locations) != 0 || exec.RawInput.(map[string]any)["command"] != "git push --force" {
		t.Errorf("execute request = %+v", h.client.perms[1])
	}
}

// TestUseAnnouncesTheCallThenAsksByItsID: /use makes a tool call as Claude
// Code's ACP adapter does: the tool_call update has the kind and locations,
// the permission request names the call by id with its title and rawInput
// only, offers "Always Allow" first, and the call then completes (allowed)
// or fails (refused).
func TestUseAnnouncesTheCallThenAsksByItsID(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession("/ws")
	answers := []acp.RequestPermissionResponse{
		{Outcome: acp.NewRequestPermissionOutcomeSelected("allow")},
		{Outcome: acp.NewRequestPermissionOutcomeSelected("reject")},
	}
	h.client.onPerm = func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		h.client.mu.Lock()
		defer h.client.mu.Unlock()
		a := answers[0]
		answers = answers[1:]
		return a, nil
	}
	_, got := h.run(sid, "/use edit notes.txt\n/use execute make\n/use edit")
	want := []string{
		"tool_call call-1 edit notes.txt pending", "tool_call_update call-1 completed", "agent: permission: allow",
		"tool_call call-2 execute make pending", "tool_call_update call-2 failed", "agent: permission: reject",
		"agent: use: error: want /use KIND TARGET",
	}
	if !equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	call := h.client.updates[len(h.client.updates)-len(want)].Update.ToolCall
	if call.Kind != acp.ToolKindEdit || len(call.Locations) != 1 || call.Locations[0].Path != "/ws/notes.txt" {
		t.Errorf("tool_call = %+v", call)
	}
	if len(h.client.perms) != 2 {
		t.Fatalf("permission requests = %+v", h.client.perms)
	}
	b, err := json.Marshal(h.client.perms[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"options":[{"kind":"allow_always","name":"Always Allow","optionId":"allow_always"},{"kind":"allow_once","name":"Allow","optionId":"allow"},{"kind":"reject_once","name":"Reject","optionId":"reject"}],"sessionId":"` + string(sid) + `","toolCall":{"rawInput":{"paths":["/ws/notes.txt"]},"title":"edit notes.txt","toolCallId":"call-1"}}`; string(b) != want {
		t.Errorf("request\n%s\nwant\n%s", b, want)
	}
}

func TestCapabilitiesRespected(t *testing.T) {
	h := start(t, t.TempDir())
	if _, err := h.conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	sid := h.newSession("/")
	_, got := h.run(sid, "/read /a\n/write /b x\n/terminal ls")
	want := []string{
		"agent: read /a: error: client did not advertise fs.readTextFile",
		"agent: write /b: error: client did not advertise fs.writeTextFile",
		"agent: terminal ls: error: client did not advertise terminal",
	}
	if !equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if calls := h.client.callLog(); len(calls) != 0 {
		t.Errorf("client was called: %q", calls)
	}
}

// TestCancel cancels turns at each kind of waiting point. It synchronises
// on the agent's log: each session/cancel logs "cancel" once it has had its
// effect, so a test that counts the cancels it sent knows when the agent has
// handled them all (a cancel handled late must not be taken for the next one,
// nor reach the next turn).
func TestCancel(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(t.TempDir())

	sent := 0 // session/cancel notifications sent so far
	handled := func() bool { return strings.Count(h.log.String(), "msg=cancel") >= sent }
	cancelWhen := func(prompt string, ready func() bool) (acp.PromptResponse, []string) {
		t.Helper()
		from := h.client.numUpdates()
		type result struct {
			resp acp.PromptResponse
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			resp, err := h.prompt(sid, acp.TextBlock(prompt))
			ch <- result{resp, err}
		}()
		testsupport.Eventually(t, "turn in progress: "+prompt, ready)
		sent++
		if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if r.err != nil {
			t.Fatalf("%q: prompt error after cancel: %v", prompt, r.err)
		}
		testsupport.Eventually(t, "the agent handled the cancel of "+prompt, handled)
		return r.resp, h.client.described(from)
	}

	// During /slow chunks: the turn stops early, after what it had sent.
	base := h.client.numUpdates()
	resp, got := cancelWhen("/slow 20\n/chunks 1000", func() bool { return h.client.numUpdates() >= base+3 })
	if resp.StopReason != acp.StopReasonCancelled || len(got) < 3 || len(got) >= 1000 {
		t.Errorf("cancel during /slow: %s, %d updates", resp.StopReason, len(got))
	}
	for i, d := range got {
		if want := fmt.Sprintf("agent: chunk %d", i+1); d != want {
			t.Errorf("cancel during /slow: update %d is %q, want %q", i, d, want)
			break
		}
	}

	// During /sleep: nothing is sent.
	started := strings.Count(h.log.String(), "turn started")
	resp, got = cancelWhen("/sleep 600000\nafter", func() bool { return strings.Count(h.log.String(), "turn started") > started })
	if resp.StopReason != acp.StopReasonCancelled || len(got) != 0 {
		t.Errorf("cancel during /sleep: %s, %q", resp.StopReason, got)
	}

	// During a permission request: the client answers "cancelled", the agent
	// reports it, then stops.
	asked := make(chan struct{})
	release := make(chan struct{})
	h.client.mu.Lock()
	h.client.onPerm = func(ctx context.Context, _ acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		close(asked)
		<-release
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	h.client.mu.Unlock()
	go func(want int) {
		// Answer only once the agent has handled this turn's session/cancel
		// (or, should it never, after Wait's bound: the checks below fail).
		<-asked
		testsupport.Wait(func() bool { return strings.Count(h.log.String(), "msg=cancel") >= want })
		close(release)
	}(sent + 1)
	resp, got = cancelWhen("/permission\nafter", func() bool {
		select {
		case <-asked:
			return true
		default:
			return false
		}
	})
	if resp.StopReason != acp.StopReasonCancelled || !equal(got, []string{"agent: permission: cancelled"}) {
		t.Errorf("cancel during permission: %s, %q", resp.StopReason, got)
	}

	// During terminal/wait_for_exit: the agent kills and releases the terminal.
	h.client.mu.Lock()
	h.client.blockWait = true
	h.client.calls = nil
	h.client.mu.Unlock()
	resp, got = cancelWhen("/terminal sleep 100", func() bool {
		calls := h.client.callLog()
		return len(calls) > 0 && calls[len(calls)-1] == "wait term-1"
	})
	if resp.StopReason != acp.StopReasonCancelled || len(got) != 0 {
		t.Errorf("cancel during terminal: %s, %q", resp.StopReason, got)
	}
	testsupport.Eventually(t, "terminal kill and release", func() bool {
		calls := h.client.callLog()
		return len(calls) == 4 && calls[2] == "kill term-1" && calls[3] == "release term-1"
	})

	// The session still works.
	if reason, got := h.run(sid, "hello"); reason != acp.StopReasonEndTurn || !equal(got, []string{"agent: echo: hello"}) {
		t.Errorf("after cancel: %s %q", reason, got)
	}
}

func TestLoadInSecondRun(t *testing.T) {
	dir := t.TempDir()
	cwd := t.TempDir()

	h1 := start(t, dir)
	h1.initialize()
	sid := h1.newSession(cwd)
	h1.run(sid, "hello")
	h1.run(sid, "/think hmm\n/tool x\n/plan a; b")
	if err := h1.close(); err != nil {
		t.Fatalf("first Run: %v", err)
	}

	// A second "process" with the same state dir.
	h2 := start(t, dir)
	h2.initialize()
	if _, err := h2.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	want := []string{
		"user: hello", "agent: echo: hello",
		"user: /think hmm\n/tool x\n/plan a; b", "thought: hmm", "tool_call call-1 x pending", "tool_call_update call-1 completed", "plan: a | b",
	}
	if got := h2.client.described(0); !equal(got, want) {
		t.Errorf("replay:\n got %q\nwant %q", got, want)
	}
	// Tool call ids continue, the session counter too.
	if _, got := h2.run(sid, "/tool y"); !equal(got, []string{"tool_call call-2 y pending", "tool_call_update call-2 completed"}) {
		t.Errorf("after load: %q", got)
	}
	if s := h2.newSession(cwd); s != "sess-2" {
		t.Errorf("next session id = %q, want sess-2", s)
	}
	for _, bad := range []acp.SessionId{"sess-999", "../sessions/sess-1", ""} {
		_, err := h2.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: bad, Cwd: cwd, McpServers: []acp.McpServer{}})
		if errCode(err) != -32002 {
			t.Errorf("load %q: err = %v, want -32002", bad, err)
		}
	}
	if err := h2.close(); err != nil {
		t.Fatalf("second Run: %v", err)
	}

	// A third process sees the second one's turn too.
	h3 := start(t, dir)
	h3.initialize()
	if _, err := h3.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := h3.client.described(0); len(got) != len(want)+3 || got[len(got)-3] != "user: /tool y" {
		t.Errorf("third replay: %q", got)
	}
}

func TestResumeListClose(t *testing.T) {
	dir := t.TempDir()
	cwdA, cwdB := t.TempDir(), t.TempDir()
	h1 := start(t, dir)
	h1.initialize()
	h1.newSession(cwdA)
	h1.newSession(cwdB)
	h1.close()

	h := start(t, dir)
	h.initialize()
	list, err := h.conn.ListSessions(ctxT(t), acp.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 2 || list.Sessions[0].SessionId != "sess-1" || list.Sessions[1].Cwd != cwdB {
		t.Fatalf("list = %+v, %v", list, err)
	}
	list, err = h.conn.ListSessions(ctxT(t), acp.ListSessionsRequest{Cwd: &cwdB})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionId != "sess-2" {
		t.Fatalf("list cwd = %+v, %v", list, err)
	}
	if _, err := h.conn.ResumeSession(ctxT(t), acp.ResumeSessionRequest{SessionId: "sess-1", Cwd: cwdA}); err != nil {
		t.Fatal(err)
	}
	if n := h.client.numUpdates(); n != 0 {
		t.Errorf("resume replayed %d updates", n)
	}
	if _, got := h.run("sess-1", "hi"); !equal(got, []string{"agent: echo: hi"}) {
		t.Errorf("after resume: %q", got)
	}
	if _, err := h.conn.CloseSession(ctxT(t), acp.CloseSessionRequest{SessionId: "sess-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.prompt("sess-1", acp.TextBlock("x")); errCode(err) != -32002 {
		t.Errorf("prompt after close: %v", err)
	}
}

func TestExit(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir)
	h.initialize()
	sid := h.newSession(t.TempDir())
	from := h.client.numUpdates()
	_, perr := h.prompt(sid, acp.TextBlock("/chunks 2\n/exit 3\nafter"))
	err := h.wait()
	var ee ErrExit
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Run = %v, want ErrExit{3}", err)
	}
	if perr == nil {
		t.Errorf("prompt got an answer after /exit")
	}
	// The chunks were written before the crash; the client may still be
	// processing them when its Prompt call fails.
	testsupport.Eventually(t, "both chunks", func() bool { return h.client.numUpdates() >= from+2 })
	if got := h.client.described(from); !equal(got, []string{"agent: chunk 1", "agent: chunk 2"}) {
		t.Errorf("updates: %q", got)
	}
	for _, l := range h.wire.lines() {
		if strings.Contains(l, `"stopReason"`) || strings.Contains(l, `"error"`) {
			t.Errorf("a prompt answer was written: %s", l)
		}
	}
	// The crashed turn is not stored.
	sf, lerr := (&store{dir: dir}).load(string(sid))
	if lerr != nil || len(sf.History) != 0 {
		t.Errorf("stored history after /exit: %v, %v", sf, lerr)
	}
}

// TestWireOrder checks on the wire that every update of a turn precedes the
// turn's answer, and that the agent writes nothing but JSON-RPC.
func TestWireOrder(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(t.TempDir())
	if _, err := h.prompt(sid, acp.TextBlock("/chunks 300\n/think t\n/big 100k\n/tool z")); err != nil {
		t.Fatal(err)
	}
	h.close()

	updates, answer := 0, -1
	for i, l := range h.wire.lines() {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.JSONRPC != "2.0" {
			t.Fatalf("line %d is not JSON-RPC: %.200s", i, l)
		}
		if m.Method == "session/update" {
			if answer >= 0 {
				t.Errorf("update on line %d after the prompt answer on line %d", i, answer)
			}
			updates++
		}
		if bytes.Contains(m.Result, []byte(`"stopReason"`)) {
			answer = i
		}
	}
	if updates != 300+1+1+2 || answer < 0 {
		t.Errorf("%d updates, answer on line %d", updates, answer)
	}
}

func TestRunStops(t *testing.T) {
	// ctx cancellation ends Run, cancelling the running turn.
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(t.TempDir())
	go h.prompt(sid, acp.TextBlock("/sleep 60000"))
	testsupport.Eventually(t, "turn started", func() bool { return strings.Contains(h.log.String(), "turn started") })
	h.cancel()
	if err := h.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}

	// An unusable state dir is reported at once.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), strings.NewReader(""), io.Discard, Options{StateDir: file}); err == nil {
		t.Errorf("Run with a file as state dir succeeded")
	}
}

func TestConcurrentProcessesGetDistinctIDs(t *testing.T) {
	dir := t.TempDir()
	cwd := t.TempDir()
	var mu sync.Mutex
	seen := map[acp.SessionId]bool{}
	var wg sync.WaitGroup
	for p := 0; p < 3; p++ {
		h := start(t, dir)
		h.initialize()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				resp, err := h.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[resp.SessionId] {
					t.Errorf("duplicate session id %s", resp.SessionId)
				}
				seen[resp.SessionId] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := 1; i <= 30; i++ {
		if !seen[acp.SessionId(fmt.Sprintf("sess-%d", i))] {
			t.Errorf("sess-%d not handed out", i)
		}
	}
}

func TestExtensionRequest(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	got, err := h.conn.CallExtension(ctxT(t), "_demo/echo", map[string]any{"x": 1})
	if err != nil || string(got) != `{"x":1}` {
		t.Errorf("_demo/echo = %s, %v", got, err)
	}
	if _, err := h.conn.CallExtension(ctxT(t), "_demo/nope", nil); errCode(err) != -32601 {
		t.Errorf("_demo/nope: %v", err)
	}
}

// The agent never writes logs to out: every line it writes is JSON.
func TestLogsStayOffTheWire(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(t.TempDir())
	h.run(sid, "hello\n/tool t")
	h.close()
	if h.log.String() == "" {
		t.Errorf("nothing logged")
	}
	sc := bufio.NewScanner(strings.NewReader(strings.Join(h.wire.lines(), "\n")))
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("non-JSON line on the wire: %q", sc.Text())
		}
	}
}

// TestScript: scripted turns run in place of the prompts' text, in order,
// and prompts past the script run their own text; /say says its text as it is.
func TestScript(t *testing.T) {
	h := start(t, t.TempDir(), func(o *Options, _ *testClient) {
		o.Script = []string{"/say Hi!\\nHow can I help?", "/think hmm\nplain"}
	})
	h.initialize()
	sid := h.newSession(t.TempDir())
	for _, tc := range []struct {
		prompt string
		want   []string
	}{
		{"hello", []string{"agent: Hi!\nHow can I help?"}},
		{"ignored text", []string{"thought: hmm", "agent: echo: plain"}},
		{"past the script", []string{"agent: echo: past the script"}},
	} {
		reason, got := h.run(sid, tc.prompt)
		if reason != acp.StopReasonEndTurn || !equal(got, tc.want) {
			t.Errorf("prompt %q: %s %q, want end_turn %q", tc.prompt, reason, got, tc.want)
		}
	}
}

func TestForkCopiesTheHistoryIntoANewSessionAndLeavesTheForkedOne(t *testing.T) {
	dir := t.TempDir()
	cwd, forkCwd := t.TempDir(), t.TempDir()
	h1 := start(t, dir)
	if caps := h1.initialize().AgentCapabilities.SessionCapabilities; caps.Fork != nil {
		t.Errorf("fork announced without Options.Fork")
	}
	sid := h1.newSession(cwd)
	h1.run(sid, "/tool x")
	h1.close()

	h := start(t, dir, func(o *Options, _ *testClient) { o.Fork = true })
	if caps := h.initialize().AgentCapabilities.SessionCapabilities; caps.Fork == nil {
		t.Errorf("fork not announced with Options.Fork")
	}
	res, err := h.conn.UnstableForkSession(ctxT(t), acp.UnstableForkSessionRequest{SessionId: sid, Cwd: forkCwd})
	if err != nil || res.SessionId != "sess-2" {
		t.Fatalf("session/fork = %+v, %v", res, err)
	}
	// The fork goes on from the history: its tool calls count on.
	if _, got := h.run(res.SessionId, "/tool y\n/cwd"); !equal(got, []string{"tool_call call-2 y pending", "tool_call_update call-2 completed", "agent: session cwd: " + forkCwd + "\nprocess cwd: " + mustGetwd(t)}) {
		t.Errorf("the fork's turn: %q", got)
	}
	if _, err := h.conn.UnstableForkSession(ctxT(t), acp.UnstableForkSessionRequest{SessionId: "sess-999", Cwd: forkCwd}); errCode(err) != -32002 {
		t.Errorf("fork of an unknown session: %v, want -32002", err)
	}
	h.close()

	// The session forked holds its own history only, and the fork both.
	h3 := start(t, dir)
	h3.initialize()
	for id, want := range map[acp.SessionId]int{sid: 3, res.SessionId: 7} {
		before := h3.client.numUpdates()
		if _, err := h3.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
			t.Fatal(err)
		}
		if n := h3.client.numUpdates() - before; n != want {
			t.Errorf("%s replays %d updates, want %d: %q", id, n, want, h3.client.described(before))
		}
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
