package runner_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/runner"
)

// scriptedTurn drives an agent as a client would: initialize, a session, one
// prompt, allowing the first permission asked. It returns every line the
// client received, with the agent's random session id replaced.
func scriptedTurn(t *testing.T, in io.Writer, out io.Reader, cwd string) []string {
	t.Helper()
	rd := acp.NewReader(out, 0)
	var lines []string
	var sid string
	send := func(s string) {
		if _, err := io.WriteString(in, s+"\n"); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	await := func(id string) {
		for {
			m, err := rd.Next()
			if err != nil {
				t.Fatalf("read: %v (got %d lines)", err, len(lines))
			}
			line := string(m.Raw)
			if sid != "" {
				line = strings.ReplaceAll(line, sid, "SID")
			}
			lines = append(lines, line)
			if m.Kind == acp.Request && m.Method == "session/request_permission" {
				var p struct {
					Options []struct {
						OptionID string `json:"optionId"`
					} `json:"options"`
				}
				_ = json.Unmarshal(m.Params, &p)
				send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, m.ID, p.Options[0].OptionID))
			}
			if m.Kind == acp.Response && string(m.ID) == id {
				if id == "2" {
					var r struct {
						SessionID string `json:"sessionId"`
					}
					_ = json.Unmarshal(m.Result, &r)
					sid = r.SessionID
					lines[len(lines)-1] = strings.ReplaceAll(line, sid, "SID")
				}
				return
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}}`)
	await("1")
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	await("2")
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hello"}]}}`, sid))
	await("3")
	return lines
}

// TestM1_InteropWithTheSDKExampleAgent runs acp-go-sdk's own example agent
// alone and through the chain: the client sees exactly the same messages.
func TestM1_InteropWithTheSDKExampleAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK's example agent and runs two slow turns")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "example-agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example agent: %v\n%s", err, out)
	}

	cmd := exec.Command(bin)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	alone := scriptedTurn(t, stdin, bufio.NewReader(stdout), dir)
	stdin.Close()
	_ = cmd.Wait()

	s := startSession(t, map[string]string{
		"blaise.star": fmt.Sprintf("agent(command = %q)\nsetup(use(\"./spy.star\"))\n", bin),
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    return next(message)
`,
	}, runner.Options{})
	proxied := scriptedTurn(t, s.in, s.out2, dir)
	if strings.Join(alone, "\n") != strings.Join(proxied, "\n") {
		t.Fatalf("the client saw different messages through the chain:\nalone:\n%s\nproxied:\n%s", strings.Join(alone, "\n"), strings.Join(proxied, "\n"))
	}
	if len(alone) < 8 {
		t.Fatalf("only %d messages", len(alone))
	}
	_ = os.Remove(bin)
}
