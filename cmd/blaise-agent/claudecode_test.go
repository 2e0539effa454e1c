package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/claudetest"
	"github.com/rogpeppe/go-internal/diff"
)

// claudeLab runs Claude Code's ACP adapter offline: the fake API, a home
// directory of its own, a workspace per way in.
type claudeLab struct {
	t    *testing.T
	argv []string // node and the adapter
	api  *claudetest.API
	dir  string
	home string
}

func newClaudeLab(t *testing.T) *claudeLab {
	c := &claudeLab{t: t, argv: claudetest.Adapter(t, "../../testdata/claude-code"), api: claudetest.NewAPI(t), dir: t.TempDir()}
	c.home = c.workspace("home")
	return c
}

// workspace makes the directory name in the lab.
func (c *claudeLab) workspace(name string) string {
	c.t.Helper()
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return dir
}

func (c *claudeLab) env() []string { return claudetest.Env(c.home, c.api.URL) }

// start starts argv (the adapter, or blaise-agent acp) in work, in a
// process group that the test's end kills: Claude Code's own process is a
// child of the adapter.
func (c *claudeLab) start(work string, argv ...string) *acpProc {
	c.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Env = c.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := startACP(c.t, cmd, work, nil)
	c.t.Cleanup(func() { c.stop(p) })
	return p
}

// stop kills p's process group: Claude Code's process, a child of the
// adapter, holds the adapter's stdout and stderr after it exits.
func (c *claudeLab) stop(p *acpProc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// claudeTurn opens a session in work on p and sends claudetest.Prompt, as a
// client with the fs capabilities: it answers permission requests with the
// option answer and fs/write_text_file by writing the file. It returns the
// response to initialize and what the client received from the response
// to session/new to that of the prompt, normalized (claudeMessages).
func claudeTurn(t *testing.T, p *acpProc, work, answer string) (*acp.Message, []string) {
	t.Helper()
	init := p.Initialize(`{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false}`)
	p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, work))
	_, resp := p.Until(acptest.ResponseTo("2"))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new: %s", resp.Raw)
	}
	p.Prompt(3, r.SessionID, claudetest.Prompt(filepath.Join(work, "hello.txt")))
	got := []*acp.Message{resp}
	for {
		m := p.Next()
		got = append(got, m)
		switch {
		case m.Kind == acp.Response && string(m.ID) == "3":
			return init, claudeMessages(t, got, r.SessionID, work)
		case m.Kind != acp.Request:
		case m.Method == "session/request_permission":
			p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, m.ID, answer))
		case m.Method == "fs/write_text_file":
			var w struct{ Path, Content string }
			if err := json.Unmarshal(m.Params, &w); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(w.Path, []byte(w.Content), 0o644); err != nil {
				t.Fatal(err)
			}
			p.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID))
		default:
			t.Fatalf("unexpected request: %s", m.Raw)
		}
	}
}

// claudeMessages are raw messages as lines to compare: the ids of the
// agent's requests (each front end numbers its own) as $ID, the session id
// as $SESSION, the workspace as $WORK. available_commands_update, which
// Claude Code sends when it is ready, at no fixed place among the others,
// is left out.
func claudeMessages(t *testing.T, raws []*acp.Message, sid, work string) []string {
	t.Helper()
	var out []string
	for _, m := range raws {
		var v map[string]any
		if err := json.Unmarshal(m.Raw, &v); err != nil {
			t.Fatalf("%s: %v", m.Raw, err)
		}
		if m.Kind == acp.Request {
			v["id"] = "$ID"
		}
		if strings.Contains(string(m.Params), `"sessionUpdate":"available_commands_update"`) {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.NewReplacer(sid, "$SESSION", work, "$WORK").Replace(string(b)))
	}
	return out
}

// TestClaudeCode_ATurnThroughAcpAndRunIsWhatTheAdapterSends runs Claude
// Code's ACP adapter (testdata/claude-code, pinned) offline against the
// fake API: a turn in which the model writes a file through the client,
// with Claude Code's permission request on the way. The client receives
// the same messages from the adapter directly, through `acp` with plugs
// and through `run`, except for what docs/editors.md lists: a request a
// plug answered does not reach the client. On the way:
// blaise:permissions decides Claude Code's requests, which name the tool
// call by id alone, on what its tool_call update said (kind edit, the
// path inside the workspace), and `run --yes` chooses "Allow", not
// "Always Allow", so Claude Code writes no standing grant into the
// workspace's .claude/settings.local.json.
func TestClaudeCode_ATurnThroughAcpAndRunIsWhatTheAdapterSends(t *testing.T) {
	t.Parallel()
	c := newClaudeLab(t)
	bin := self(t)

	// The adapter, directly: the client answers as run --yes does.
	work := c.workspace("direct")
	direct := c.start(work, c.argv...)
	directInit, want := claudeTurn(t, direct, work, "allow")
	checkWritten(t, work)
	c.stop(direct)
	permission := -1
	for i, m := range want {
		if strings.Contains(m, `"method":"session/request_permission"`) {
			permission = i
		}
	}
	if permission < 0 || !strings.Contains(want[permission], `"toolCall":{"rawInput":{"content":"hello from the fake model\n","file_path":"$WORK/hello.txt"},"title":"Write $WORK/hello.txt","toolCallId":"`+claudetest.ToolCallID+`"}`) {
		t.Fatalf("the adapter's turn has no permission request shaped as Claude Code's (by id; the kind in the tool_call before):\n%s", strings.Join(want, "\n"))
	}

	// acp, with blaise:permissions allowing edits inside the workspace:
	// the plug answers the request, the rest reaches the client unchanged.
	work = c.workspace("acp")
	config := filepath.Join(work, "blaise.star")
	writeFile(t, config, fmt.Sprintf(`agent(command = %q, args = [%q])
setup(use("blaise:permissions", inputs = {"rules": [{"action": "allow", "kinds": ["edit"], "where": "inside"}]}))
`, c.argv[0], c.argv[1]))
	state := filepath.Join(work, ".state")
	p := c.start(work, bin, "acp", "-c", config, "--state-dir", state)
	acpInit, got := claudeTurn(t, p, work, "reject") // the client refuses: the plug must allow
	checkWritten(t, work)
	if err := p.close(); err != nil {
		t.Errorf("acp exited: %v\n%s", err, p.stderr)
	}
	withoutRequest := append(append([]string(nil), want[:permission]...), want[permission+1:]...)
	if diff := cmpLines(withoutRequest, got); diff != "" {
		t.Errorf("acp: what the client received differs from the adapter's (-adapter without the permission request +acp):\n%s", diff)
	}
	if !regexp.MustCompile(`blaise/permissions: allow .*tool="Write ` + regexp.QuoteMeta(work) + `/hello.txt" kind=edit rule=1 paths=` + regexp.QuoteMeta(work) + `/hello.txt\n`).MatchString(p.stderr.String()) {
		t.Errorf("blaise:permissions did not allow the write by its rule:\n%s", p.stderr)
	}
	answered := false
	for _, r := range transcript(t, state) {
		answered = answered || r.Plug == "blaise/permissions" && strings.Contains(string(r.Message), `"optionId":"allow"`)
	}
	if !answered {
		t.Errorf("the transcript has no answer of blaise/permissions with Allow")
	}
	t.Run("initialize", func(t *testing.T) {
		// The first connection's initialize carries the agent's prompt and
		// MCP capabilities, which acp learns by asking the agent once.
		type caps struct {
			AgentCapabilities struct {
				PromptCapabilities, McpCapabilities any
			}
		}
		var d, a caps
		if json.Unmarshal(directInit.Result, &d) != nil || json.Unmarshal(acpInit.Result, &a) != nil {
			t.Fatalf("initialize: %s\n%s", directInit.Raw, acpInit.Raw)
		}
		if !reflect.DeepEqual(d, a) {
			t.Errorf("the first initialize through acp does not carry the agent's capabilities\nadapter: %s\nacp:     %s", directInit.Result, acpInit.Result)
		}
	})

	// run --yes, with blaise:permissions' default rules, which ask about
	// edits: run chooses Allow, and the transcript has what run received.
	work = c.workspace("run")
	config = filepath.Join(work, "blaise.star")
	writeFile(t, config, fmt.Sprintf("agent(command = %q, args = [%q])\nsetup(use(\"blaise:permissions\"))\n", c.argv[0], c.argv[1]))
	state = filepath.Join(work, ".state")
	run := exec.Command(bin, "run", "-c", config, "--state-dir", state, "--yes", claudetest.Prompt(filepath.Join(work, "hello.txt")))
	run.Dir = work
	run.Env = c.env()
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	checkWritten(t, work)
	if !strings.Contains(string(out), "permission requested: Write "+work+"/hello.txt\n  [1] Always Allow\n  [2] Allow\n  [3] Reject\nchoose [1-3]: 2 (default)\n") {
		t.Errorf("run --yes did not choose Allow:\n%s", out)
	}
	var received []*acp.Message
	sid := ""
	for _, r := range transcript(t, state) {
		if r.Direction != "from_agent" {
			continue
		}
		m, err := acp.Parse(r.Message)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.ID) == "2" && m.Kind == acp.Response {
			var res struct {
				SessionID string `json:"sessionId"`
			}
			json.Unmarshal(m.Result, &res)
			sid = res.SessionID
		}
		if sid != "" {
			received = append(received, m)
		}
	}
	if diff := cmpLines(want, claudeMessages(t, received, sid, work)); diff != "" {
		t.Errorf("run: what the client received differs from the adapter's (-adapter +run):\n%s", diff)
	}

	if calls := c.api.Calls(); slices.ContainsFunc(calls, func(s string) bool {
		return s != "POST /v1/messages" && s != "POST /v1/messages/count_tokens"
	}) {
		t.Errorf("Claude Code asked the API for more than messages: %q", calls)
	}
}

// checkWritten checks that the turn wrote hello.txt in work, through the
// client, and that Claude Code wrote no standing grant of the tool into
// the workspace (as it does when "Always Allow" is chosen).
func checkWritten(t *testing.T, work string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(work, "hello.txt")); err != nil || string(b) != claudetest.Content {
		t.Errorf("%s/hello.txt: %q, %v", work, b, err)
	}
	if b, err := os.ReadFile(filepath.Join(work, ".claude", "settings.local.json")); err == nil {
		t.Errorf("a standing grant in the workspace: .claude/settings.local.json:\n%s", b)
	}
}

// transcript returns the records of the transcript of the one session in
// state.
func transcript(t *testing.T, state string) []acp.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(state, "sessions", "*", "transcript.jsonl"))
	if len(files) != 1 {
		t.Fatalf("transcripts in %s: %q", state, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return acptest.Records(t, string(b))
}

// cmpLines returns a diff of two lists of lines, "" when they are equal.
func cmpLines(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	return string(diff.Diff("want", []byte(strings.Join(want, "\n")+"\n"), "got", []byte(strings.Join(got, "\n")+"\n")))
}
