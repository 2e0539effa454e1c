package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
)

// transcriptOf writes a session with the transcript of records given as
// (direction, kind, method, plug, message) and returns its id.
func (s *site) transcriptOf(records ...[5]string) string {
	t := s.t
	t.Helper()
	id := lifecycle.NewID()
	if err := s.store.CreateSession(s.t.Context(), &lifecycle.Record{ID: id, AgentName: "demo", State: lifecycle.Paused, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	tw, err := s.store.Transcript(s.t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	for i, r := range records {
		line := map[string]any{"seq": i + 1, "time": "2026-01-01T00:00:00Z", "direction": r[0], "kind": r[1], "method": r[2], "message": json.RawMessage(r[4])}
		if r[2] == "" {
			delete(line, "method")
		}
		if r[3] != "" {
			line["plug"] = r[3]
		}
		if strings.Contains(r[4], `"id"`) {
			var m struct{ ID json.RawMessage }
			json.Unmarshal([]byte(r[4]), &m)
			line["id"] = m.ID
		}
		b, _ := json.Marshal(line)
		fmt.Fprintf(tw, "%s\n", b)
	}
	return id
}

func update(u string) [5]string {
	return [5]string{"from_agent", "notification", "session/update", "", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":` + u + `}}`}
}

func chunk(kind, text string) [5]string {
	t, _ := json.Marshal(text)
	return update(`{"sessionUpdate":"` + kind + `","content":{"type":"text","text":` + string(t) + `}}`)
}

// An agent's Markdown is rendered on the server and is inert: raw HTML is
// left out, a javascript: link is not a link, and an image's onerror is
// never an attribute.
func TestConversationRendersAnAgentsMarkdownInert(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(chunk("agent_message_chunk", "# Heading\n\nSome **bold** text and `code`.\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[click](javascript:alert(3)) and [ok](https://example.com)\n\n```go\nfmt.Println(\"<b>\")\n```\n"))
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK, "<h1>Heading</h1>", "<strong>bold</strong>", "<code>code</code>",
		`<a href="https://example.com">ok</a>`, `<code class="language-go">fmt.Println(&quot;&lt;b&gt;&quot;)`, `class="msg agent"`)
	for _, bad := range []string{"<script>alert", "onerror", `href="javascript:`, "<img"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q:\n%s", bad, body)
		}
	}
}

// The conversation shows a prompt and an answer as distinct blocks, a
// tool call as a card that its updates change (status, content as a
// diff), the plan as a checklist, thinking collapsed, a permission request
// and the plug's answer in place, and each run's start with an anchor.
func TestConversationShowsBlocksOfWhatHappened(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(
		[5]string{"to_agent", "request", "session/prompt", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"a","prompt":[{"type":"text","text":"fix it\nplease"}]}}`},
		chunk("agent_thought_chunk", "pondering deeply"),
		update(`{"sessionUpdate":"plan","entries":[{"content":"read the code","priority":"high","status":"completed"},{"content":"edit it","priority":"high","status":"in_progress"}]}`),
		update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit main.go","kind":"edit","status":"pending","locations":[{"path":"/src/main.go","line":3}]}`),
		update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"diff","path":"/src/main.go","oldText":"a\nold line\nz\n","newText":"a\nnew line\nz\n"}]}`),
		[5]string{"from_agent", "request", "session/request_permission", "", `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"a","toolCall":{"toolCallId":"t2","title":"Run rm"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"deny","name":"Deny","kind":"reject_once"}]}}`},
		[5]string{"to_agent", "response", "", "guard", `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"deny"}}}`},
		chunk("agent_message_chunk", "Done."),
		[5]string{"from_agent", "response", "", "", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`},
	)
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK,
		`<h3 class="run" id="run-1"><a href="#run-1">Run 1</a>`,
		`class="msg user"`, "fix it\nplease",
		`<details class="thought"`, "<summary>Thinking</summary>", "pondering deeply",
		`<section class="plan"`, `<input type="checkbox" disabled checked> read the code`, `<input type="checkbox" disabled> edit it`, "in progress",
		`<article class="tool status-completed"`, "Edit main.go", `<span class="badge">edit</span>`, `<span class="status">completed</span>`, "<code>/src/main.go:3</code>",
		`<span class="ddel">- old line</span>`, `<span class="dadd">&#43; new line</span>`, `<span class="dctx">  a</span>`,
		"The agent asks permission: <strong>Run rm</strong> (allow, deny)",
		`Permission: <strong>deny</strong>, chosen by <span class="plug">plug guard</span>`,
		`class="msg agent"`, "Done.", "Turn ended: end_turn",
		`href="/sessions/`+id+`/transcript"`, `download="`+id+`.jsonl"`)
	if strings.Count(body, `class="tool `) != 1 {
		t.Errorf("a tool call's update is a card of its own:\n%s", body)
	}
}

// The raw transcript stays a click away: as `sessions log` renders it,
// and its records to download.
func TestConversationsRawTranscriptAndDownload(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(chunk("agent_message_chunk", "plain words"))
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id+"/transcript", nil)
	want(t, resp, body, http.StatusOK, "── run started 2026-01-01 00:00:00 UTC ──", "plain words")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("content type %q", ct)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/"+id+"/transcript.jsonl", nil)
	want(t, resp, body, http.StatusOK, `"text":"plain words"`)
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="`+id+`.jsonl"` {
		t.Errorf("content disposition %q", cd)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/"+lifecycle.NewID()+"/transcript", nil)
	want(t, resp, body, http.StatusNotFound, "does not exist")
}

// Cancel applies to a turn the page sent: with none running, it says so
// and sends nothing.
func TestCancelWithNoTurnFromThePageChangesNothing(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(chunk("agent_message_chunk", "idle"))
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/sessions/"+id+"/cancel", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusConflict, "Nothing was cancelled: no turn sent from this dashboard runs in the session")
}

// Links where they help: a runner's row links the active sessions it
// runs, a session's page its agent and the runner's row; the favicon is
// the dashboard's own.
func TestRunnersAndSessionsLinkEachOther(t *testing.T) {
	s := newSite(t, false)
	reg, err := s.store.MintRegistration(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.store.Register(t.Context(), reg.Token, "r7"); err != nil {
		t.Fatal(err)
	}
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "onr7", AgentName: "demo", State: lifecycle.Active, Runner: "r7", Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: "endedonr7", AgentName: "demo", State: lifecycle.Ended, Runner: "r7", Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/runners", nil)
	want(t, resp, body, http.StatusOK, `id="runner-r7"`, `running: <a href="/sessions/onr7">onr7</a>`)
	if strings.Contains(body, "endedonr7") {
		t.Errorf("the runners page links an ended session:\n%s", body)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions/onr7", nil)
	want(t, resp, body, http.StatusOK, `<a href="/agents/demo">demo</a>`, `<a href="/runners#runner-r7">r7</a>`, `<link rel="icon" href="/assets/favicon.svg"`)
	for _, path := range []string{"/favicon.ico", "/assets/favicon.svg"} {
		resp, body = s.do(c, http.MethodGet, path, nil)
		want(t, resp, body, http.StatusOK, "<svg")
		if ct := resp.Header.Get("Content-Type"); ct != "image/svg+xml" {
			t.Errorf("%s: content type %q", path, ct)
		}
	}
}

// A tool call's card follows its updates on an open page: the update
// comes as the card again, under the same id, with its new status.
func TestConversationToolCardStatusFollowsItsUpdates(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Run the tests","kind":"execute","status":"in_progress"}`))
	c := s.browser()
	s.signIn(c)
	next := s.follow(c, id, dashboard.EventReset, dashboard.EventAppend)
	_, reset := next()
	card := regexp.MustCompile(`<article class="tool status-in_progress" id="(b[0-9-]+)">`).FindStringSubmatch(reset)
	if card == nil {
		t.Fatalf("no tool card in progress:\n%s", reset)
	}
	tw, err := s.store.Transcript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	u := update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"exit status 1"}}]}`)
	fmt.Fprintf(tw, `{"seq":2,"time":"2026-01-01T00:00:01Z","direction":"from_agent","kind":"notification","method":"session/update","message":%s}`+"\n", u[4])
	name, html := next()
	if name != dashboard.EventAppend || !strings.Contains(html, `<article class="tool status-failed" id="`+card[1]+`">`) ||
		!strings.Contains(html, `<span class="status">failed</span>`) || !strings.Contains(html, "exit status 1") || strings.Count(html, "<article") != 1 {
		t.Fatalf("after the update, %s:\n%s", name, html)
	}
}

// A tool call's locations link to the diff of their file on the page: the
// call's own, or the latest one before it; a file of no diff is its path
// and line, as text.
func TestToolLocationLinksToItsDiff(t *testing.T) {
	s := newSite(t, false)
	id := s.transcriptOf(
		update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit main.go","kind":"edit","status":"pending","locations":[{"path":"/src/main.go","line":3},{"path":"/src/other.go"}]}`),
		update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"edited"}},{"type":"diff","path":"/src/main.go","oldText":"old\n","newText":"new\n"}]}`),
		update(`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"Read main.go","kind":"read","status":"completed","locations":[{"path":"/src/main.go","line":10}]}`),
	)
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	edit := regexp.MustCompile(`<article class="tool status-completed" id="(b[0-9-]+)">`).FindStringSubmatch(body)
	if edit == nil {
		t.Fatalf("no tool card:\n%s", body)
	}
	want(t, resp, body, http.StatusOK,
		`<figure class="diff" id="`+edit[1]+`-diff-1">`,
		`<li><a href="#`+edit[1]+`-diff-1"><code>/src/main.go:3</code></a></li>`,
		`<li><code>/src/other.go</code></li>`,
		`<li><a href="#`+edit[1]+`-diff-1"><code>/src/main.go:10</code></a></li>`)
}
