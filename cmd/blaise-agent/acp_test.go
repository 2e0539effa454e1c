package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/agentcaps"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// acpLab is a configuration around the demo agent with a plug that keeps
// persisted state and writes what each run saw to $DIR/<session>-run-<n>.
type acpLab struct {
	t     *testing.T
	bin   string
	dir   string
	state string
}

const acpCounterPlug = `plug(name = "counter", persisted = schema.object(n = schema.int()))

def on_session(ctx, next):
    v = ctx.persisted.value
    n = (v.n if v else 0) + 1
    ctx.persisted.set({"n": n})
    ctx.runner.fs.write_file("$DIR/%s-run-%d" % (ctx.session.id, ctx.run.number), "n=%d kind=%s" % (n, ctx.run.kind))
    next()
`

func newAcpLab(t *testing.T) *acpLab {
	t.Helper()
	l := &acpLab{t: t, bin: self(t), dir: t.TempDir()}
	l.state = filepath.Join(l.dir, "state")
	files := map[string]string{
		"blaise.star":  fmt.Sprintf("agent(command = %q, args = [\"demo-agent\", \"--state-dir\", %q])\nsetup(use(\"./counter.star\", id = \"c\"))\n", l.bin, filepath.Join(l.dir, "demo")),
		"counter.star": strings.ReplaceAll(acpCounterPlug, "$DIR", l.dir),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *acpLab) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(l.dir, name))
	return string(b)
}

func (l *acpLab) record(id string) *lifecycle.Record {
	l.t.Helper()
	store, err := filestore.OpenStore(l.state)
	if err != nil {
		l.t.Fatal(err)
	}
	rec, err := store.Session(l.t.Context(), id)
	if err != nil {
		l.t.Fatal(err)
	}
	return rec
}

// waitState waits until the session is in state.
func (l *acpLab) waitState(id string, state lifecycle.State) *lifecycle.Record {
	l.t.Helper()
	var rec *lifecycle.Record
	if !testsupport.Wait(func() bool { rec = l.record(id); return rec.State == state }) {
		l.t.Fatalf("session %s is %s, want %s", id, rec.State, state)
	}
	return rec
}

// acpProc is `blaise-agent acp` in a process of its own, driven with raw
// JSON-RPC lines.
type acpProc struct {
	*acptest.Client
	t      testing.TB
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr *testsupport.Buffer
	cwd    string
}

func (l *acpLab) start(args ...string) *acpProc {
	l.t.Helper()
	args = append([]string{"acp", "-c", filepath.Join(l.dir, "blaise.star"), "--state-dir", l.state, "--log-level", "debug"}, args...)
	cmd := exec.Command(l.bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(l.dir, "xdg"))
	return startACP(l.t, cmd, l.dir, nil)
}

// startACP starts cmd, an ACP agent on stdio (acp, acp --server), with a
// raw client on its pipes; the client's failures show its stderr and, when
// it is given, more.
func startACP(t testing.TB, cmd *exec.Cmd, cwd string, more func() string) *acpProc {
	t.Helper()
	stderr := &testsupport.Buffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := stderr.String
	if more != nil {
		logs = func() string { return stderr.String() + "\n" + more() }
	}
	p := &acpProc{t: t, cmd: cmd, in: in, stderr: stderr, cwd: cwd}
	msgs := acptest.Read(out, func(err error) { t.Errorf("stdout carries something that is not ACP: %v", err) })
	p.Client = &acptest.Client{
		T:       t,
		In:      msgs,
		Out:     acptest.WriteLines(in),
		Timeout: 60 * time.Second,
		Logs:    logs,
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// What the test did not read: a stream that filled the reader's
		// queue would hold its goroutine for ever.
		for range msgs {
		}
		if t.Failed() {
			t.Logf("acp stderr:\n%s", stderr)
		}
	})
	return p
}

func (p *acpProc) send(format string, args ...any) {
	p.t.Helper()
	p.Send(fmt.Sprintf(format, args...))
}

// await reads up to the response with id and returns what came before it.
func (p *acpProc) await(id string) ([]*acp.Message, *acp.Message) {
	p.t.Helper()
	var before []*acp.Message
	for {
		m := p.Next()
		if m.Kind == acp.Response && string(m.ID) == id {
			return before, m
		}
		before = append(before, m)
	}
}

func (p *acpProc) newSession(id int) string {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, id, p.cwd)
	_, resp := p.await(fmt.Sprint(id))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		p.t.Fatalf("session/new: %s", resp.Raw)
	}
	return r.SessionID
}

// prompt sends a prompt and returns the texts of its answer. A prompt that
// reached a run just as the inactivity limit stopped it is answered with an
// error that asks to send it again: like a client, prompt sends it again.
func (p *acpProc) prompt(id int, sid, text string) string {
	p.t.Helper()
	b, _ := json.Marshal(text)
	for try := 0; ; try++ {
		rid := id + 1000*try
		p.send(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, rid, sid, b)
		msgs, resp := p.await(fmt.Sprint(rid))
		if sendAgain(resp) && try < 3 {
			continue
		}
		if resp.Error != nil {
			p.t.Fatalf("prompt %d: %s", rid, resp.Raw)
		}
		return acptest.Texts(p.t, sid, msgs)
	}
}

// sendAgain reports whether resp is the error of a request that a run
// stopping as idle did not answer.
func sendAgain(resp *acp.Message) bool {
	return resp.Error != nil && strings.Contains(string(resp.Error), "send the request again")
}

// close closes the client's side and waits for the process to exit.
func (p *acpProc) close() error {
	p.t.Helper()
	p.in.Close()
	for range p.In {
	}
	return p.exit("its client left")
}

// exit waits for the process to exit; one that does not fails the test
// instead of hanging it.
func (p *acpProc) exit(after string) error {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		p.t.Fatalf("blaise-agent acp did not exit after %s", after)
	}
	return nil
}

// TestL6_AcpIdleSessionsPauseAndResumeOnTheNextPromptOrLoad drives
// `blaise-agent acp` like an editor: two sessions on one connection, each a
// blaise session with its own session process (C13); permission requests
// of both with ids of the connection; an idle session pauses and the next
// prompt resumes it, and a session/load of a paused session replays its
// history (L6); and when the client leaves, the sessions stop as idle (L9).
func TestL6_AcpIdleSessionsPauseAndResumeOnTheNextPromptOrLoad(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	p := l.start("--inactivity-limit", "500ms")

	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}}`)
	_, resp := p.await("0")
	var init struct {
		Caps struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
		Info struct {
			Name string `json:"name"`
		} `json:"agentInfo"`
	}
	// No session of the configuration has answered yet: the agent's own
	// answer, asked of it alone.
	if err := json.Unmarshal(resp.Result, &init); err != nil || !init.Caps.LoadSession || init.Info.Name != "blaise-demo-agent" {
		t.Fatalf("initialize: %s", resp.Raw)
	}

	// Two sessions: their ids are blaise session ids, with a session
	// process each.
	a, b := p.newSession(1), p.newSession(2)
	if a == b {
		t.Fatalf("two sessions with id %s", a)
	}
	if got := p.prompt(3, a, "hello a"); got != "echo: hello a" {
		t.Fatalf("a: %q", got)
	}
	if got := p.prompt(4, b, "hello b"); got != "echo: hello b" {
		t.Fatalf("b: %q", got)
	}
	// Recorded before anything was said in them (the prompts waited).
	ra, rb := l.record(a), l.record(b)
	if ra.ACPSessionID == "" || rb.ACPSessionID == "" || ra.ACPSessionID == rb.ACPSessionID || ra.ACPSessionID == a {
		t.Fatalf("ACP session ids %q %q", ra.ACPSessionID, rb.ACPSessionID)
	}

	// Permission requests of both sessions at once: the demo agents number
	// their requests alike, the client sees ids of the connection.
	prompts := map[string]string{"5": a, "6": b} // prompts in flight → session
	for id, sid := range prompts {
		p.send(`{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission"}]}}`, id, sid)
	}
	asked := map[string]string{} // front id → session
	var rest []*acp.Message
	for next := 100; len(prompts) > 0; {
		m := p.Next()
		switch m.Kind {
		case acp.Request:
			var r struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &r)
			if prev, dup := asked[acp.IDKey(m.ID)]; dup {
				t.Fatalf("two requests with id %s reached the client (sessions %s and %s)", m.ID, prev, r.SessionID)
			}
			asked[acp.IDKey(m.ID)] = r.SessionID
			answer := "allow_once"
			if r.SessionID == b {
				answer = "reject_once"
			}
			p.send(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, m.ID, answer)
		case acp.Response:
			sid, ok := prompts[string(m.ID)]
			if !ok {
				t.Fatalf("unexpected response %s", m.Raw)
			}
			delete(prompts, string(m.ID))
			if sendAgain(m) {
				next++
				prompts[fmt.Sprint(next)] = sid
				p.send(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission"}]}}`, next, sid)
				continue
			}
			if m.Error != nil {
				t.Fatalf("prompt: %s", m.Raw)
			}
		default:
			rest = append(rest, m)
		}
	}
	var ofA, ofB []*acp.Message
	for _, m := range rest {
		if strings.Contains(string(m.Params), `"sessionId":"`+a+`"`) {
			ofA = append(ofA, m)
		} else {
			ofB = append(ofB, m)
		}
	}
	if got := acptest.Texts(t, a, ofA); !strings.HasSuffix(got, "permission: allow_once") {
		t.Fatalf("a: %q", got)
	}
	if got := acptest.Texts(t, b, ofB); !strings.HasSuffix(got, "permission: reject_once") {
		t.Fatalf("b: %q", got)
	}
	bySession := map[string]int{}
	for _, sid := range asked {
		bySession[sid]++
	}
	if bySession[a] == 0 || bySession[b] == 0 {
		t.Fatalf("permission requests %v", asked)
	}

	// The inactivity limit passes: a pauses (agent stopped, environment
	// kept); the next prompt resumes it transparently.
	paused := l.waitState(a, lifecycle.Paused)
	if paused.Pause.Reason != "idle" || !paused.Pause.MayResume {
		t.Fatalf("pause %+v", paused.Pause)
	}
	if got := p.prompt(7, a, "again"); got != "echo: again" {
		t.Fatalf("after the resume: %q (the replayed history must not reach the client)", got)
	}
	if rec := l.record(a); rec.Runs < 2 {
		t.Fatalf("no resume run: %+v", rec)
	}
	if got := l.file(a + "-run-2"); got != "n=2 kind=resume" {
		t.Fatalf("the plug saw %q in run 2", got)
	}

	// session/load of a paused session: the client sees the history.
	l.waitState(b, lifecycle.Paused)
	p.send(`{"jsonrpc":"2.0","id":8,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, b, l.dir)
	msgs, resp := p.await("8")
	if resp.Error != nil {
		t.Fatalf("load: %s", resp.Raw)
	}
	if got := acptest.Texts(t, b, msgs); !strings.HasPrefix(got, "> hello b|echo: hello b|") || !strings.HasSuffix(got, "permission: reject_once") {
		t.Fatalf("replay %q", got)
	}
	if got := p.prompt(9, b, "and b"); got != "echo: and b" {
		t.Fatalf("b after load: %q", got)
	}

	// Unknown sessions.
	p.send(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"nosuchsession","prompt":[]}}`)
	if _, resp = p.await("10"); !strings.Contains(string(resp.Error), "-32002") {
		t.Fatalf("unknown session: %s", resp.Raw)
	}

	// The agent of a crashes: its prompt fails, the session pauses (failed)
	// and the next prompt resumes it; b goes on meanwhile.
	p.send(`{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/exit 3"}]}}`, a)
	if _, resp = p.await("11"); resp.Error == nil {
		t.Fatalf("the prompt of a crashed agent: %s", resp.Raw)
	}
	if got := p.prompt(12, b, "still here"); got != "echo: still here" {
		t.Fatalf("b: %q", got)
	}
	if got := p.prompt(13, a, "back"); got != "echo: back" {
		t.Fatalf("a after the crash: %q", got)
	}
	if rec := l.record(a); rec.Runs < 3 {
		t.Fatalf("no resume after the crash: %+v", rec)
	}

	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	for _, id := range []string{a, b} {
		if rec := l.record(id); rec.State != lifecycle.Paused || rec.PID != 0 {
			t.Fatalf("%s after the client left: %+v", id, rec)
		}
	}

	// L9: a new connection (default inactivity limit) loads a; when its
	// client leaves, the session stops as idle and pauses.
	p = l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	if _, resp = p.await("0"); !strings.Contains(string(resp.Result), `"name":"blaise-demo-agent"`) {
		t.Fatalf("initialize after sessions of the configuration ran: %s", resp.Raw)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, a, l.dir)
	if _, resp = p.await("1"); resp.Error != nil {
		t.Fatalf("load: %s", resp.Raw)
	}
	if got := p.prompt(2, a, "last"); got != "echo: last" {
		t.Fatalf("a: %q", got)
	}
	runs := l.record(a).Runs
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	rec := l.record(a)
	if rec.State != lifecycle.Paused || rec.Stop == nil || rec.Stop.Reason != "idle" || rec.Stop.Run != runs || !rec.Stop.Delivered || rec.Pause.Reason != "idle" {
		t.Fatalf("L9: %+v stop %+v pause %+v", rec, rec.Stop, rec.Pause)
	}
	if got := l.file(fmt.Sprintf("%s-run-%d", a, runs)); got != fmt.Sprintf("n=%d kind=resume", runs) {
		t.Fatalf("run %d saw %q", runs, got)
	}

	// The connections started no session but the client's two.
	out, err := exec.Command(l.bin, "sessions", "--all", "--state-dir", l.state).CombinedOutput()
	if err != nil {
		t.Fatalf("sessions: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\n"); n != 3 || strings.Count(string(out), "paused") != 2 {
		t.Fatalf("sessions:\n%s", out)
	}
}

// TestAcp_TypeScriptSDKClient runs testdata/ts-client/client.mjs: a client
// built on the official ACP TypeScript SDK (@agentclientprotocol/sdk) opens
// a session through `blaise-agent acp`, answers a permission request,
// disconnects, and loads the paused session from a second connection. It
// needs node and `npm ci --prefix testdata/ts-client`.
func TestAcp_TypeScriptSDKClient(t *testing.T) {
	t.Parallel()
	client, err := filepath.Abs("../../testdata/ts-client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(client, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		t.Skip("the TypeScript SDK is not installed: run `npm ci --prefix testdata/ts-client`")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	l := newAcpLab(t)
	cmd := exec.Command(node, "client.mjs", l.bin, filepath.Join(l.dir, "blaise.star"), l.state, l.dir)
	cmd.Dir = client
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(l.dir, "xdg"), "BLAISE_LOG_LEVEL=debug")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	_, line, ok := strings.Cut(string(out), "RESULT ")
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if !ok || json.Unmarshal([]byte(line), &res) != nil {
		t.Fatalf("no result from client.mjs: %s", out)
	}
	rec := l.record(res.SessionID)
	if rec.State != lifecycle.Paused || rec.Runs != 2 || rec.Stop == nil || rec.Stop.Reason != "idle" {
		t.Fatalf("the session after the second connection: %+v", rec)
	}
	if got := l.file(res.SessionID + "-run-2"); got != "n=2 kind=resume" {
		t.Fatalf("the plug saw %q in run 2", got)
	}
}

// sessionDirs lists the session records of the lab's state directory.
func (l *acpLab) sessionDirs() []string {
	l.t.Helper()
	entries, err := os.ReadDir(filepath.Join(l.state, "sessions"))
	if err != nil && !os.IsNotExist(err) {
		l.t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// TestAcpStartsASessionAtSessionNewNotAtInitialize: a client that
// initializes, lists sessions and leaves starts no session and runs no plug
// (the plug writes a file when it attaches); session/new then starts exactly
// one.
// Its one process meanwhile is the spare session process it started to
// be quicker at session/new, which then runs the session, and which a
// front end that opens none leaves behind no more than the rest.
func TestAcpStartsASessionAtSessionNewNotAtInitialize(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	if _, resp := p.await("0"); resp.Error != nil {
		t.Fatalf("initialize: %s", resp.Raw)
	}
	spare := spareOf(t, p.cmd.Process.Pid)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	if _, resp := p.await("1"); string(resp.Result) != `{"sessions":[]}` {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	testsupport.WaitGone(t, spare, "the spare session process of a front end that opened no session")
	if ids := l.sessionDirs(); len(ids) != 0 {
		t.Fatalf("sessions after initialize and list: %v", ids)
	}
	if runs, _ := filepath.Glob(filepath.Join(l.dir, "*-run-*")); len(runs) != 0 {
		t.Fatalf("the plug ran: %v", runs)
	}

	p = l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	spare = spareOf(t, p.cmd.Process.Pid)
	id := p.newSession(1)
	if pid := l.record(id).PID; pid != spare {
		t.Fatalf("the session runs in process %d, not in the spare %d", pid, spare)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	if _, resp := p.await("2"); !strings.Contains(string(resp.Result), `{"sessionId":"`+id+`","cwd":"`+l.dir+`"`) {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if ids := l.sessionDirs(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("sessions after one session/new: %v", ids)
	}
	if runs, _ := filepath.Glob(filepath.Join(l.dir, "*-run-*")); len(runs) != 1 || l.file(id+"-run-1") != "n=1 kind=start" {
		t.Fatalf("plug runs: %v", runs)
	}
}

// TestAcpStartsItsSpareBeforeItLoadsTheConfigurationWhereSessionsWereKept:
// with a state directory from earlier sessions, the spare session process
// starts before the configuration is loaded (it takes longer to start than
// a client to ask for a session); a configuration that then fails ends
// acp with its error, and the spare with it, and makes no session.
func TestAcpStartsItsSpareBeforeItLoadsTheConfigurationWhereSessionsWereKept(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "blaise.star"), []byte("fail(\"this configuration is not ready\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = l.start()
	if err := p.exit("its configuration failed"); err == nil {
		t.Fatal("acp with a failing configuration exited 0")
	}
	logs := p.stderr.String()
	started := regexp.MustCompile(`a spare session process waits for the next run pid=(\d+)`).FindStringSubmatchIndex(logs)
	failed := strings.Index(logs, "this configuration is not ready")
	if started == nil || failed < started[0] {
		t.Fatalf("acp did not start its spare before it loaded the configuration:\n%s", logs)
	}
	spare, _ := strconv.Atoi(logs[started[2]:started[3]])
	testsupport.WaitGone(t, spare, "the spare session process of a front end whose configuration failed")
	if ids := l.sessionDirs(); len(ids) != 0 {
		t.Fatalf("sessions: %v", ids)
	}
}

// spareOf returns the one child of the front end pid once it is its spare
// session process (the agent asked alone for its capabilities, on a
// configuration's first start, is stopped as the spare starts).
func spareOf(t *testing.T, pid int) int {
	t.Helper()
	var children []int
	testsupport.Eventually(t, "the front end's spare session process as its one child", func() bool {
		children = testsupport.Children(pid)
		if len(children) != 1 {
			return false
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", children[0]))
		return slices.Contains(strings.Split(string(env), "\x00"), engine.SpareEnv+"=1")
	})
	return children[0]
}

// TestAcpSessionNewSaysWhyTheSessionCannotStart: an agent that
// cannot start fails session/new with the command and the OS error, not
// a bare "connection closed"; the session it made is ended.
func TestAcpSessionNewSaysWhyTheSessionCannotStart(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	if err := os.WriteFile(filepath.Join(l.dir, "blaise.star"), []byte("agent(command = \"/nonexistent/agent\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, l.dir)
	if _, resp := p.await("1"); !strings.Contains(string(resp.Error), `exec \"/nonexistent/agent\": no such file or directory`) {
		t.Fatalf("session/new: %s", resp.Raw)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	ids := l.sessionDirs()
	if len(ids) != 1 {
		t.Fatalf("sessions: %v", ids)
	}
	if rec := l.record(ids[0]); rec.State != lifecycle.Ended {
		t.Fatalf("the session that could not start is %s", rec.State)
	}
}

// waitFile waits until the file exists: the sign that a run got there.
func (l *acpLab) waitFile(name string) string {
	l.t.Helper()
	var b []byte
	testsupport.Eventually(l.t, name, func() bool {
		b, _ = os.ReadFile(filepath.Join(l.dir, name))
		return len(b) > 0
	})
	return strings.TrimSpace(string(b))
}

// signalled sends sig to acp and waits for it to exit.
func (p *acpProc) signalled(sig os.Signal) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	return p.exit(sig.String())
}

// gone reports whether the process whose pid a shell wrote to the file has
// exited.
func (l *acpLab) gone(pidFile string) bool {
	pid, err := strconv.Atoi(l.waitFile(pidFile))
	if err != nil {
		l.t.Fatal(err)
	}
	return !testsupport.Alive(pid)
}

// TestL9_AcpHonoursSignalsAtEveryMoment: SIGTERM or SIGINT during a slow plug
// attach, while an agent never answers initialize, or during a turn, stops
// the runs (an opened session pauses as idle, one that never opened ends) and
// acp exits, with nothing left running. The plug attaching for ever is
// cancelled by the runner's stop grace (lifecycle.DefaultStopGrace), within
// acp's default shutdown timeout.
func TestL9_AcpHonoursSignalsAtEveryMoment(t *testing.T) {
	t.Parallel()
	const slowAttach = `plug(name = "slow")

def on_session(ctx, next):
    ctx.host.exec(["sh", "-c", "echo $$ > $DIR/attach.pid; exec sleep 600"])
    next()
`
	const demo = `agent(command = "sh", args = ["-c", "echo $$ > $DIR/agent.pid; exec blaise-agent demo-agent"])
`
	for _, c := range []struct {
		name, config, plug, pidFile string
		sig                         os.Signal
		turn                        bool // the session opens and a turn runs
	}{
		{"slow attach", demo + `setup(use("./slow.star"))
`, slowAttach, "attach.pid", syscall.SIGTERM, false},
		{"agent never answers", `agent(command = "sh", args = ["-c", "echo $$ > $DIR/agent.pid; exec sleep 600"])
`, "", "agent.pid", syscall.SIGINT, false},
		{"during a turn", demo, "", "agent.pid", syscall.SIGTERM, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newAcpLab(t)
			files := map[string]string{"blaise.star": c.config, "slow.star": c.plug}
			for name, content := range files {
				content = strings.ReplaceAll(content, "$DIR", l.dir)
				content = strings.ReplaceAll(content, "exec blaise-agent", "exec "+l.bin)
				if err := os.WriteFile(filepath.Join(l.dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// As an earlier connection would have learned them: no agent
			// starts at initialize, and the pid file is the session's.
			l.knowCapabilities()
			p := l.start()
			p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
			p.await("0")
			if c.turn {
				id := p.newSession(1)
				p.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/slow 1000\n/chunks 600"}]}}`, id)
				for p.Next().Method != "session/update" {
				}
			} else {
				p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, l.dir)
			}
			l.waitFile(c.pidFile)
			if err := p.signalled(c.sig); err != nil {
				t.Fatalf("exit: %v", err)
			}
			if !c.turn {
				// The client learns why its session/new went unanswered.
				if _, resp := p.await("1"); !strings.Contains(string(resp.Error), "blaise-agent acp is stopping") {
					t.Fatalf("session/new: %s", resp.Raw)
				}
			}
			if !l.gone(c.pidFile) {
				t.Fatalf("the process of %s is still running", c.pidFile)
			}
			ids := l.sessionDirs()
			if len(ids) != 1 {
				t.Fatalf("sessions: %v", ids)
			}
			rec := l.record(ids[0])
			if rec.State == lifecycle.Active || rec.PID != 0 {
				t.Fatalf("the session after the signal: %+v", rec)
			}
			if c.turn && (rec.State != lifecycle.Paused || rec.Pause.Reason != "idle") {
				t.Fatalf("the opened session after the signal: %+v, pause %+v", rec, rec.Pause)
			}
		})
	}
}

// knowCapabilities keeps an answer to initialize for the lab's
// configuration and agent, as a first connection would have.
func (l *acpLab) knowCapabilities() {
	l.t.Helper()
	if _, err := filestore.OpenStore(l.state); err != nil {
		l.t.Fatal(err)
	}
	cfg, err := chain.LoadConfig(filepath.Join(l.dir, "blaise.star"), log.New(io.Discard))
	if err != nil {
		l.t.Fatal(err)
	}
	a := cfg.Agent
	caps := agentcaps.Open(l.state, filepath.Join(l.dir, "blaise.star"), agentcaps.Agent{Command: a.Command, Args: a.Args, Env: a.Env, Cwd: a.Cwd}, time.Minute)
	if err := caps.Keep([]byte(`{"protocolVersion":1,"agentCapabilities":{}}`)); err != nil {
		l.t.Fatal(err)
	}
}

// TestAcpSignalWhileTheAgentIsAskedForItsCapabilities: SIGTERM while the
// first initialize waits for an agent that never answers stops that agent;
// initialize is answered without the agent's capabilities, no session was
// made, and acp exits.
func TestAcpSignalWhileTheAgentIsAskedForItsCapabilities(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	config := fmt.Sprintf("agent(command = \"sh\", args = [\"-c\", \"echo $$ > %s/agent.pid; exec sleep 600\"])\n", l.dir)
	if err := os.WriteFile(filepath.Join(l.dir, "blaise.star"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	l.waitFile("agent.pid")
	if err := p.signalled(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if _, resp := p.await("0"); !strings.Contains(string(resp.Result), `"agentInfo":{"name":"blaise-agent"`) {
		t.Fatalf("initialize: %s", resp.Raw)
	}
	if !l.gone("agent.pid") {
		t.Fatal("the agent asked for its capabilities is still running")
	}
	if ids := l.sessionDirs(); len(ids) != 0 {
		t.Fatalf("sessions: %v", ids)
	}
}

// TestAcpResumeThatCannotStartSaysWhy: when the agent of a paused
// session can no longer start, the prompt that resumes it gets the agent's
// exit code and stderr, and the front end does not try again by itself.
func TestAcpResumeThatCannotStartSaysWhy(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	config := fmt.Sprintf("agent(command = \"sh\", args = [\"-c\", \"if [ -e %s/broken ]; then echo no such model >&2; exit 4; fi; exec %s demo-agent\"])\n", l.dir, l.bin)
	if err := os.WriteFile(filepath.Join(l.dir, "blaise.star"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	id := p.newSession(1)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":%q}}`, id)
	p.await("2")
	l.waitState(id, lifecycle.Paused)
	if err := os.WriteFile(filepath.Join(l.dir, "broken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, id)
	_, resp := p.await("3")
	if e := string(resp.Error); !strings.Contains(e, "the session could not resume") || !strings.Contains(e, "exited with code 4") || !strings.Contains(e, "no such model") {
		t.Fatalf("prompt: %s", resp.Raw)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if rec := l.record(id); rec.Runs != 2 {
		t.Fatalf("runs: %d", rec.Runs)
	}
}

// TestAcpListsPastABrokenRecord: one corrupt session.json does not
// hide the other sessions from session/list.
func TestAcpListsPastABrokenRecord(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	id := p.newSession(1)
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	l.waitState(id, lifecycle.Paused)
	broken := filepath.Join(l.state, "sessions", "broken0record")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "session.json"), []byte(`{"id": "broken0rec`), 0o600); err != nil {
		t.Fatal(err)
	}
	p = l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	if _, resp := p.await("1"); !strings.Contains(string(resp.Result), `"sessionId":"`+id+`"`) {
		t.Fatalf("session/list: %s", resp.Raw)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestL6_ExpiredSessionTornDownByAcpWithoutSweep: a long-lived `acp` tears
// down a session whose paused lifetime passed, with reason expired, by
// itself: no `sessions sweep`, no new command.
func TestL6_ExpiredSessionTornDownByAcpWithoutSweep(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	td := `
def on_teardown(ctx, next):
    ctx.runner.fs.write_file("$DIR/teardown", next().reason)
`
	if err := os.WriteFile(filepath.Join(l.dir, "counter.star"), []byte(strings.ReplaceAll(acpCounterPlug+td, "$DIR", l.dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := l.start("--inactivity-limit", "200ms", "--paused-lifetime", "300ms")
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	p.await("0")
	a := p.newSession(1)
	if got := p.prompt(2, a, "hello"); got != "echo: hello" {
		t.Fatalf("a: %q", got)
	}
	// Idle, then paused; then its paused lifetime passes while acp runs.
	rec := l.waitState(a, lifecycle.Ended)
	if rec.EndReason != lifecycle.Expired || rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle {
		t.Fatalf("record %+v", rec)
	}
	if got := l.file("teardown"); got != "expired" {
		t.Fatalf("teardown saw %q", got)
	}
}

// TestResumeLoadsTheCwdAndMcpServersOfTheRecord: the session's record keeps
// the cwd and mcpServers of the client's session/new, and a later front end's
// transparent resume loads the agent's session with them, transcript or not.
func TestResumeLoadsTheCwdAndMcpServersOfTheRecord(t *testing.T) {
	t.Parallel()
	l := newAcpLab(t)
	mcp := `[{"name":"tools","command":"/bin/true","args":[],"env":[]}]`
	p := l.start()
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":%s}}`, l.dir, mcp)
	_, resp := p.await("1")
	sid, _ := acpResultSessionID(resp)
	if sid == "" {
		t.Fatalf("session/new: %s", resp.Raw)
	}
	if got := p.prompt(2, sid, "first"); got != "echo: first" {
		t.Fatalf("first prompt: %q", got)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	rec := l.waitState(sid, lifecycle.Paused)
	if rec.CWD != l.dir || compact(t, rec.MCPServers) != mcp {
		t.Fatalf("the record keeps cwd %q and mcpServers %s, want %q and %s", rec.CWD, rec.MCPServers, l.dir, mcp)
	}
	// Nothing else to learn them from.
	store, err := filestore.OpenStore(l.state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(store.TranscriptPath(sid)); err != nil {
		t.Fatal(err)
	}

	p = l.start() // in the test's directory, not the session's
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	p.await("0")
	if got := p.prompt(1, sid, "again"); got != "echo: again" {
		t.Fatalf("prompt after the resume: %q", got)
	}
	if err := p.close(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	transcript, err := os.ReadFile(store.TranscriptPath(sid))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range acptest.Records(t, string(transcript)) {
		if r.Direction != acp.ToAgent.Direction() || r.Method != "session/load" {
			continue
		}
		m, err := acp.Parse(r.Message)
		if err != nil {
			t.Fatal(err)
		}
		var params struct {
			Cwd        string          `json:"cwd"`
			MCPServers json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal(m.Params, &params); err != nil {
			t.Fatal(err)
		}
		if params.Cwd != l.dir || compact(t, params.MCPServers) != mcp {
			t.Fatalf("the resume loaded the session with cwd %q and mcpServers %s, want %q and %s", params.Cwd, params.MCPServers, l.dir, mcp)
		}
		return
	}
	t.Fatalf("no session/load reached the agent:\n%s", transcript)
}

func compact(t *testing.T, raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

// acpResultSessionID reads the sessionId of a result.
func acpResultSessionID(resp *acp.Message) (string, error) {
	var r struct {
		SessionID string `json:"sessionId"`
	}
	err := json.Unmarshal(resp.Result, &r)
	return r.SessionID, err
}
