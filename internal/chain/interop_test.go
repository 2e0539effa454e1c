package chain_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// scriptedTurn drives an agent as a client would: initialize, a session, one
// prompt, allowing the first permission asked. It returns every line the
// client received, with the agent's random session id replaced.
func scriptedTurn(c *acptest.Client, cwd string) []string {
	c.T.Helper()
	var lines []string
	var sid string
	await := func(id string) {
		for {
			m := c.Next()
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
				c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, m.ID, p.Options[0].OptionID))
			}
			if acptest.ResponseTo(id)(m) {
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
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}}`)
	await("1")
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	await("2")
	c.Prompt(3, sid, "hello")
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
	stderr := &testsupport.Buffer{}
	cmd.Stderr = stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := acptest.Read(stdout, func(err error) { t.Errorf("read: %v", err) })
	alone := scriptedTurn(&acptest.Client{T: t, In: read, Out: acptest.WriteLines(stdin), Logs: stderr.String}, dir)
	stdin.Close()
	_ = cmd.Wait()

	s := startSession(t, map[string]string{
		"blaise.star": fmt.Sprintf("agent(command = %q)\nsetup(use(\"./spy.star\"))\n", bin),
		"spy.star": `plug(name = "spy")
def on_message(ctx, message, next):
    return next(message)
`,
	}, chain.Options{})
	proxied := scriptedTurn(s.Client, dir)
	if strings.Join(alone, "\n") != strings.Join(proxied, "\n") {
		t.Fatalf("the client saw different messages through the chain:\nalone:\n%s\nproxied:\n%s", strings.Join(alone, "\n"), strings.Join(proxied, "\n"))
	}
	if len(alone) < 8 {
		t.Fatalf("only %d messages", len(alone))
	}
	_ = os.Remove(bin)
}
