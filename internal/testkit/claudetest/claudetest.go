// Package claudetest runs Claude Code's ACP adapter offline in tests: a
// fake Anthropic Messages API that scripts one tool call, the adapter's
// command line as testdata/claude-code installs it, and the environment
// that keeps Claude Code to the fake API and a home of its own.
package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// API is a small Anthropic Messages API, enough for Claude Code to make
// one tool call: asked by the main agent (a request that offers the tool
// mcp__acp__Write) to do what Prompt(PATH) says, it answers with a
// tool_use of mcp__acp__Write that writes Content to PATH; given the
// tool's result, it answers with text. Any other request (a title, a
// summary) gets a short text. It answers POST /v1/messages (streaming SSE,
// or JSON) and POST /v1/messages/count_tokens; everything else is a 404,
// recorded.
type API struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string // "POST /v1/messages" …, in order
}

// Content is what the model writes.
const Content = "hello from the fake model\n"

// ToolCallID is the id of the model's tool call.
const ToolCallID = "toolu_fake01"

var writeMarker = regexp.MustCompile(`WRITE:(\S+)`)

// Prompt is a prompt by which the model writes Content to path (absolute).
func Prompt(path string) string {
	return "Write a greeting: WRITE:" + path
}

// NewAPI starts the API; it stops when the test ends.
func NewAPI(t testing.TB) *API {
	f := &API{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// Calls returns the requests served so far.
func (f *API) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// request is what API reads of a request.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// contentBlock is a content block of a request or an answer.
type contentBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text,omitempty"`
	ID    string         `json:"id,omitempty"`
	Name  string         `json:"name,omitempty"`
	Input map[string]any `json:"input,omitempty"`
}

func (f *API) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":42}`)
	case r.Method == "POST" && r.URL.Path == "/v1/messages":
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		content, stop := answer(req)
		if req.Stream {
			streamMessage(w, req.Model, content, stop)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
			"content": []contentBlock{content}, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 42, "output_tokens": 7},
		})
	default:
		http.NotFound(w, r)
	}
}

// answer is the model's answer to req: one content block and the stop
// reason.
func answer(req request) (contentBlock, string) {
	offers := false
	for _, tool := range req.Tools {
		offers = offers || tool.Name == "mcp__acp__Write"
	}
	if !offers || len(req.Messages) == 0 {
		return contentBlock{Type: "text", Text: "A title"}, "end_turn"
	}
	last := req.Messages[len(req.Messages)-1]
	var blocks []contentBlock
	if json.Unmarshal(last.Content, &blocks) != nil {
		var text string
		json.Unmarshal(last.Content, &text)
		blocks = []contentBlock{{Type: "text", Text: text}}
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return contentBlock{Type: "text", Text: "I wrote the file."}, "end_turn"
		}
	}
	for _, b := range blocks {
		if m := writeMarker.FindStringSubmatch(b.Text); m != nil {
			return contentBlock{Type: "tool_use", ID: ToolCallID, Name: "mcp__acp__Write",
				Input: map[string]any{"file_path": m[1], "content": Content}}, "tool_use"
		}
	}
	return contentBlock{Type: "text", Text: "Nothing to do."}, "end_turn"
}

// streamMessage writes a message of one block as the API's server-sent
// events.
func streamMessage(w http.ResponseWriter, model string, block contentBlock, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 42, "output_tokens": 1},
	}})
	// The block starts empty; its text or input comes in one delta.
	start := map[string]any{"type": block.Type, "text": ""}
	delta := map[string]any{"type": "text_delta", "text": block.Text}
	if block.Type == "tool_use" {
		input, _ := json.Marshal(block.Input)
		start = map[string]any{"type": block.Type, "id": block.ID, "name": block.Name, "input": map[string]any{}}
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
	}
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 7}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// Adapter returns the command line of Claude Code's ACP adapter as
// `npm ci --prefix DIR` installs it (DIR: the repository's
// testdata/claude-code); the test skips without it, or fails under
// CI=true, where .ci/run installs it.
func Adapter(t testing.TB, dir string) []string {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "node_modules", "@zed-industries", "claude-code-acp", "dist", "index.js")
	why := ""
	node, err := exec.LookPath("node")
	if err != nil {
		why = "node is not installed"
	} else if _, err := os.Stat(index); err != nil {
		why = "Claude Code's ACP adapter is not installed: run `npm ci --prefix " + dir + "`"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return []string{node, index}
}

// Env is the environment Claude Code runs offline in: its home and
// configuration in home, the API at api, no other traffic; PATH, LANG and
// TMPDIR are kept.
func Env(home, api string) []string {
	env := []string{
		"HOME=" + home,
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + api,
		"ANTHROPIC_API_KEY=sk-ant-fake",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"IS_SANDBOX=1", // Claude Code refuses root otherwise
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "LANG", name == "TMPDIR":
			env = append(env, kv)
		}
	}
	return env
}
