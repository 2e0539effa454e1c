package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/testkit/browsertest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/chromedp/chromedp"
)

var setupToken = regexp.MustCompile(`token=(bls_\S+)`)

// screenshotsEnv names the directory, relative to the repository's root
// or absolute, into which the browser test writes its pictures of the
// pages: BLAISE_SCREENSHOTS=docs/screenshots refreshes the documentation's
// (README.md says so). Unset, they go to a temporary directory, so that
// running the tests changes no tracked file.
const screenshotsEnv = "BLAISE_SCREENSHOTS"

// screenshotDir is where the browser test writes its pictures.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // the test runs in cmd/blaise-agent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var viewports = []struct{ w, h int64 }{{1280, 800}, {390, 844}}

// shoot writes the page the browser shows into dir as NAME-WxH.png at each
// width, and checks its accessibility there (axe-core).
func shoot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	for _, v := range viewports {
		if err := chromedp.Do(tab, chromedp.EmulateViewport(v.w, v.h)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%dx%d.png", name, v.w, v.h)), png, 0o644); err != nil {
			t.Fatal(err)
		}
		browsertest.Accessible(t, tab, fmt.Sprintf("%s at %dx%d", name, v.w, v.h))
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardInABrowser: in a real browser, against a real `serve`, runner and demo
// agent: the first admin is created with the setup token serve printed,
// signs out and in again; a paused lifetime changed on the page is stored
// (the API reads it back); the runners page shows the connected runner
// and mints a token; a post without the form's token and a signed-out
// request are refused; a session is ended and a runner revoked from the
// page. It takes a picture of each page (screenshotDir).
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	tab := browsertest.New(t)
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	m := setupToken.FindStringSubmatch(l.logs.String())
	if m == nil {
		t.Fatalf("serve printed no setup token:\n%s", l.logs)
	}
	// A plug that logs, for the session page's plug log.
	if err := os.WriteFile(filepath.Join(l.dir, "greeter.star"), []byte("plug(name = \"greeter\")\ndef on_session(ctx, next):\n    ctx.log.info(\"hello from the plug\", who = \"ada\")\n    next()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.writeConfig("greeting.star", `setup(use("./greeter.star"))`+"\n")
	r1 := l.runner("r1", "greeting.star")
	if out := l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello there"); !strings.Contains(out, "echo: hello there") {
		t.Fatalf("run --server:\n%s", out)
	}
	id := l.sessions()[0].ID
	generate(t, l, 60) // gen00000000 to gen00000059, older than id
	shots := screenshotDir(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	do("the setup page", chromedp.Navigate(l.url+"/setup"), chromedp.WaitVisible(chromedp.ID("token")))
	shoot(t, tab, shots, "setup")
	do("creating the first admin",
		chromedp.SendKeys(chromedp.ID("token"), m[1]), chromedp.SendKeys(chromedp.ID("name"), "ada"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("form.signout")))
	do("signing out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.ID("password")))
	shoot(t, tab, shots, "signin")
	do("signing in", chromedp.SendKeys(chromedp.ID("name"), "ada"), chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("#s-"+id)))
	// The list: a page of the newest 50, titles as links, states as
	// badges; "Next page" goes on to the oldest, "Newest" back.
	waitText(t, tab, `a[href="/sessions/gen00000059"]`, "task 59: fix the flaky test in package 22")
	waitText(t, tab, "#s-gen00000059 .badge", "ended")
	shoot(t, tab, shots, "sessions")
	do("the next page", chromedp.Click(chromedp.CSS(`a[rel="next"]`)), chromedp.WaitVisible(chromedp.CSS("#s-gen00000000")))
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#session-list tbody tr").length`)); err != nil || n != 11 {
		t.Fatalf("the second page lists %d sessions (%v), want the 11 oldest", n, err)
	}
	shoot(t, tab, shots, "sessions-page2")
	do("back to the newest", chromedp.Click(chromedp.CSS(`nav.pager a[href="/sessions"]`)), chromedp.WaitVisible(chromedp.CSS("#s-"+id)))
	// The search box finds titles, without script too (a GET form).
	do("searching", chromedp.SetValue(chromedp.ID("q"), "in package 7"), chromedp.Click(chromedp.CSS("form.filters button")),
		chromedp.WaitNotPresent(chromedp.CSS("#s-"+id)), chromedp.WaitVisible(chromedp.CSS("#s-gen00000044")))
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#session-list tbody tr").length`)); err != nil || n != 2 {
		t.Fatalf("the search lists %d sessions (%v), want tasks 7 and 44", n, err)
	}
	// The first page follows the store: a session started now appears
	// without a reload.
	do("the list", chromedp.Navigate(l.url+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#s-"+id)))
	l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "another")
	var other string
	for _, r := range l.sessions() {
		if r.ID != id && !strings.HasPrefix(r.ID, "gen") {
			other = r.ID
		}
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById("s-`+other+`") !== null`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("the new session %s never appeared in the list: %v", other, err)
	}

	do("the agents page", chromedp.Navigate(l.url+"/agents"), chromedp.WaitVisible(chromedp.CSS(`a[href="/agents/demo"]`)))
	shoot(t, tab, shots, "agents")
	do("changing the paused lifetime", chromedp.Click(chromedp.CSS(`a[href="/agents/demo"]`)), chromedp.WaitVisible(chromedp.ID("paused_lifetime")),
		chromedp.SetValue(chromedp.ID("paused_lifetime"), (48*time.Hour).String()),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	shoot(t, tab, shots, "agent")
	var agent api.AgentJSON
	getJSON(t, l, api.PathAgents+"/demo", &agent)
	if agent.PausedLifetime != "48h0m0s" {
		t.Fatalf("the API reads paused lifetime %q, want 48h0m0s", agent.PausedLifetime)
	}

	status, err := chromedp.Run(tab, chromedp.Evaluate[int](`fetch("/agents/demo", {method: "POST",
		body: new URLSearchParams({idle_policy: "end", paused_lifetime: "1h0m0s"})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a post without the form token: %d, %v", status, err)
	}
	getJSON(t, l, api.PathAgents+"/demo", &agent)
	if agent.PausedLifetime != "48h0m0s" || agent.IdlePolicy != string(lifecycle.PolicyPause) {
		t.Fatalf("after a refused post the API reads %+v", agent)
	}

	do("the runners page", chromedp.Navigate(l.url+"/runners"), chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Revoke runner r1"]`)))
	if text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("main table"))); err != nil || !strings.Contains(text, "connected: agent demo, 0 live runs, blaise-agent ") ||
		!strings.Contains(text, "now (connected)") {
		t.Fatalf("the runners page says %q (%v)", text, err)
	}
	do("minting a registration token", chromedp.Click(chromedp.CSS(`form[action="/runners/tokens"] button`)), chromedp.WaitVisible(chromedp.ID("minted-token")))
	if tok, err := chromedp.Run(tab, chromedp.Value(chromedp.ID("minted-token"))); err != nil || !strings.HasPrefix(tok, "blr_") {
		t.Fatalf("the minted token: %q (%v)", tok, err)
	}
	// The listen command names this server and the agent chosen; a copy
	// button copies it.
	waitText(t, tab, "#minted-command", "--server "+l.url+" --agent demo --register-token blr_")
	do("the copy button", chromedp.WaitVisible(chromedp.CSS(`button[data-copy="minted-command"]`)))
	shoot(t, tab, shots, "runners")

	do("a session's page", chromedp.Navigate(l.url+"/sessions"), chromedp.Click(chromedp.CSS(`a[href="/sessions/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS("#conversation")))
	// Read by the page's script, not through a node of the DevTools
	// protocol: the script replaces the transcript's text node once it
	// goes live, and a node read meanwhile is gone ("No node with given id
	// found").
	waitText(t, tab, "#conversation", "hello there")
	waitText(t, tab, "#conversation", "echo: hello there")
	// Each run's plug log, folded; stored beside the messages, it may
	// come after them: a reload shows it.
	if !testsupport.Wait(func() bool {
		text, err := chromedp.Run(tab, chromedp.Evaluate[string](`fetch("/sessions/`+id+`/plug-log?run=1").then(r => r.text())`, chromedp.EvalAwaitPromise))
		return err == nil && strings.Contains(text, "INFO  greeter: hello from the plug who=ada")
	}) {
		t.Fatal("the plug log of run 1 never held the plug's line")
	}
	do("the session's page again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#conversation")))
	do("unfolding run 1's plug log", chromedp.Click(chromedp.CSS("#log-1 summary")), chromedp.WaitVisible(chromedp.CSS("#log-1 table")))
	waitText(t, tab, "#log-1", "hello from the plug who=ada")
	shoot(t, tab, shots, "session")
	// The page follows the transcript: a turn added now appears without a
	// reload.
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.querySelector("#conversation").dataset.live === "1"`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("the transcript does not go live: %v", err)
	}
	if out := l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "--session", id, "and more"); !strings.Contains(out, "echo: and more") {
		t.Fatalf("run --server --session:\n%s", out)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.querySelector("#conversation").textContent.includes("echo: and more")`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("the second turn never appeared on the page: %v", err)
	}

	// A prompt from the page resumes the paused session (L6); the answer
	// streams into the transcript.
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })
	runs := l.session(id).Runs
	do("a prompt from the page", chromedp.SetValue(chromedp.ID("prompt"), "hello from the page"), dropNotices,
		chromedp.Click(chromedp.CSS("form.prompt button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#conversation", "echo: hello from the page")
	waitText(t, tab, "#activity", "The turn ended: end_turn.")
	if got := l.session(id).Runs; got != runs+1 {
		t.Fatalf("after a prompt to the paused session: %d runs, want %d", got, runs+1)
	}
	// The page let go of the session when its turn ended: it pauses, the
	// card says so without a reload, and the terminal takes it up at once.
	testsupport.Eventually(t, "the session pauses after the page's turn", func() bool { return l.session(id).State == lifecycle.Paused })
	waitText(t, tab, "#record .state", "paused")
	if out := l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "--session", id, "from the terminal"); !strings.Contains(out, "echo: from the terminal") {
		t.Fatalf("run --server --session after the page's turn:\n%s", out)
	}
	waitText(t, tab, "#record", fmt.Sprintf("Runs%d", runs+2))
	testsupport.Eventually(t, "the session pauses after the terminal's turn", func() bool { return l.session(id).State == lifecycle.Paused })
	// The agent asks permission: the page shows the request, a person
	// answers it with the keyboard, and the turn ends with that option.
	do("a prompt that asks permission", chromedp.SetValue(chromedp.ID("prompt"), "/say before asking\n/permission Run the tests"), dropNotices,
		chromedp.Click(chromedp.CSS("form.prompt button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#activity", "The agent asks permission: Run the tests")
	waitText(t, tab, "#conversation", "before asking")
	shoot(t, tab, shots, "session-permission")
	// Focused by the page's script: #activity is replaced by the live
	// stream, and a DevTools node held meanwhile would be gone.
	do("the request's buttons", dropNotices)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`(() => { const b = document.querySelector('#activity button[value="allow_once"]'); if (!b) return false; b.focus(); return document.activeElement === b })()`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("focusing allow_once: %v", err)
	}
	do("answering with the keyboard", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#conversation", "permission: allow_once")
	waitText(t, tab, "#activity", "The turn ended: end_turn.")
	// Released again (L9): it pauses.
	testsupport.Eventually(t, "the session pauses after the second page turn", func() bool { return l.session(id).State == lifecycle.Paused })

	// The conversation: the agent's Markdown rendered, its code with a
	// copy button, thinking collapsed, the plan a checklist, a tool call a
	// card whose status follows its updates; and it follows its end.
	do("a prompt with Markdown, thinking, a plan and a tool", chromedp.SetValue(chromedp.ID("prompt"),
		"/think hidden musings\n/plan read the code; fix it\n/tool grep\n/say # Findings\\n\\nSome **bold** words.\\n\\n```\\ngo test ./...\\n```"), dropNotices,
		chromedp.Click(chromedp.CSS("form.prompt button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#activity", "The turn ended: end_turn.")
	waitText(t, tab, "#conversation .tool.status-completed", "grep: done")
	for what, js := range map[string]string{
		"the answer's heading":    `[...document.querySelectorAll("#conversation .msg.agent h1")].some(h => h.textContent === "Findings")`,
		"bold words":              `[...document.querySelectorAll("#conversation .msg.agent strong")].some(e => e.textContent === "bold")`,
		"a copy button":           `[...document.querySelectorAll("#conversation button.copy-code")].some(b => b.nextElementSibling.textContent.includes("go test ./..."))`,
		"thinking collapsed":      `[...document.querySelectorAll("#conversation details.thought")].some(d => !d.open && d.textContent.includes("hidden musings"))`,
		"the plan's checkboxes":   `[...document.querySelectorAll("#conversation .plan input[type=checkbox]")].length >= 2`,
		"the prompt as a block":   `[...document.querySelectorAll("#conversation .msg.user")].some(d => d.textContent.includes("/tool grep"))`,
		"the end of the stream":   `(c => c.scrollTop + c.clientHeight >= c.scrollHeight - 24)(document.getElementById("conversation"))`,
		"each run with an anchor": `document.querySelector("#conversation h3.run a[href='#run-1']") !== null`,
	} {
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](js, chromedp.WithPollingMutation())); err != nil {
			t.Fatalf("the conversation lacks %s: %v", what, err)
		}
	}
	do("the conversation in view", chromedp.Evaluate[chromedp.Void](`(document.getElementById("transcript-title").scrollIntoView({block: "start"}), {})`))
	shoot(t, tab, shots, "session-conversation")
	testsupport.Eventually(t, "the session pauses after the third page turn", func() bool { return l.session(id).State == lifecycle.Paused })

	// The page's turn is cancelled from the page (session/cancel): the
	// turn ends as cancelled, before the line after the wait.
	do("a long turn", chromedp.SetValue(chromedp.ID("prompt"), "/say waiting now\n/sleep 600000\nnever said"), dropNotices,
		chromedp.Click(chromedp.CSS("form.prompt button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#conversation", "waiting now")
	// Clicked by the page's script: the form is in #activity, which the
	// live stream replaces, and a node held meanwhile is gone.
	do("cancelling the turn", dropNotices)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`(() => { const b = document.querySelector('form[action="/sessions/`+id+`/cancel"] button'); if (!b) return false; b.click(); return true })()`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("cancelling the turn: %v", err)
	}
	do("the answer to the cancel", chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "#activity", "The turn ended: cancelled.")
	waitText(t, tab, "#conversation", "Turn ended: cancelled")
	if text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("conversation").textContent`)); err != nil || strings.Contains(text, "echo: never said") {
		t.Fatalf("the cancelled turn went on: %v\n%s", err, text)
	}
	testsupport.Eventually(t, "the session pauses after the cancelled turn", func() bool { return l.session(id).State == lifecycle.Paused })

	// Its history: a table of runs like `sessions show`, each run linked
	// to its start in the conversation; the agent and runner linked.
	// Opened and read through the page's script, not a node of the
	// DevTools protocol: the record, runs included, is replaced when the
	// page's live stream sends it again, and a node held meanwhile is gone.
	do("the session's page", chromedp.Navigate(l.url+"/sessions/"+id))
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`(() => { const d = document.querySelector("details.runs"); if (!d) return false; d.open = true; const r = document.querySelector("table.runs"); return r !== null && r.offsetParent !== null })()`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("the session's runs: %v", err)
	}
	waitText(t, tab, "table.runs", "Duration")
	waitText(t, tab, "table.runs #runs-1", "idle")
	for what, js := range map[string]string{
		"a run's link to its start": `document.querySelector("table.runs a[href='#run-2']") !== null && document.getElementById("run-2") !== null`,
		"the agent's link":          `document.querySelector("#record a[href='/agents/demo']") !== null`,
		"the runner's link":         `document.querySelector("#record a[href='/runners#runner-r1']") !== null`,
	} {
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](js, chromedp.WithPollingMutation())); err != nil {
			t.Fatalf("the session's page lacks %s: %v", what, err)
		}
	}
	// Scrolled by the page's script too: the runs are in the record.
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`(() => { const d = document.querySelector("details.runs"); if (!d) return false; d.scrollIntoView(); return true })()`, chromedp.WithPollingMutation())); err != nil {
		t.Fatalf("the runs in view: %v", err)
	}
	shoot(t, tab, shots, "session-runs")

	// End asks first, naming the session; Cancel changes nothing.
	do("ending a session", chromedp.Navigate(l.url+"/sessions"), chromedp.Click(chromedp.CSS("#s-"+id+" button")),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	named := id // as the list names it: its title, then its id
	if title := l.session(id).Title; title != "" {
		named = "“" + title + "” (" + id + ")"
	}
	waitText(t, tab, "#question", "End session "+named+"?")
	do("cancelling", chromedp.Click(chromedp.CSS("form.confirm a.button")), chromedp.WaitVisible(chromedp.CSS("#conversation")))
	if rec := l.session(id); rec.State != lifecycle.Paused {
		t.Fatalf("after a cancelled End: %s", rec.State)
	}
	do("ending a session", chromedp.Navigate(l.url+"/sessions"), chromedp.Click(chromedp.CSS("#s-"+id+" button")),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")), chromedp.Click(chromedp.CSS("form.confirm button.danger")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if rec := l.session(id); rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Closed {
		t.Fatalf("after End: %s (%s)", rec.State, rec.EndReason)
	}

	do("revoking a runner", chromedp.Navigate(l.url+"/runners"), chromedp.Click(chromedp.CSS(`button[aria-label="Revoke runner r1"]`)),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	waitText(t, tab, "#question", "Revoke runner r1 (")
	do("confirming the revocation", chromedp.Click(chromedp.CSS("form.confirm button.danger")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if out := l.cli(append([]string{"tokens", "list"}, l.storeFlags()...)...); !regexp.MustCompile(`runner .* r1 .* 20\d\d-`).MatchString(out) {
		t.Fatalf("after revoking r1, tokens list says:\n%s", out)
	}
	// Revoked from the page, its connection is cut: it is refused and exits.
	if err := r1.cmd.Wait(); err == nil || !strings.Contains(r1.logs.String(), "refused") {
		t.Fatalf("runner r1 after its revocation: %v\n%s", err, r1.logs)
	}

	do("signing out again", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.ID("password")),
		chromedp.Navigate(l.url+"/agents"), chromedp.WaitVisible(chromedp.ID("password")))
	loc, err := chromedp.Run(tab, chromedp.Location())
	if err != nil || !strings.HasSuffix(loc, "/signin?next=%2Fagents") {
		t.Fatalf("a signed-out browser asking for /agents is at %q (%v)", loc, err)
	}
	// Signed in there, it lands on the page it asked for.
	do("signing in from a link", chromedp.SendKeys(chromedp.ID("name"), "ada"), chromedp.SendKeys(chromedp.ID("password"), "correct horse battery"),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("form.signout button")))
	if loc, err := chromedp.Run(tab, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/agents") {
		t.Fatalf("signed in from /agents' link, the browser is at %q (%v)", loc, err)
	}
}

// dropNotices removes the page's notices: a form posted after it has
// landed on its next page once that page's notice is visible.
var dropNotices = chromedp.Evaluate[chromedp.Void](`(document.querySelectorAll("p.notice").forEach(n => n.remove()), {})`)

// waitText waits until the element sel of the page shows text.
func waitText(t *testing.T, tab context.Context, sel, text string) {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector(%q)?.textContent.includes(%q)`, sel, text)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](js, chromedp.WithPollingMutation())); err != nil {
		got, _ := chromedp.Run(tab, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel)))
		t.Fatalf("%s never showed %q: %v; it shows:\n%s", sel, text, err, got)
	}
}

// getJSON reads path of the API with the lab's token.
func getJSON(t *testing.T, l *serverLab, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, l.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// signedIn creates the dashboard's first admin with the setup token serve
// printed, and returns a browser signed in as them (one that follows no
// redirect) and the form token of its pages.
func (l *serverLab) signedIn(t testing.TB) (*http.Client, string) {
	t.Helper()
	m := setupToken.FindStringSubmatch(l.logs.String())
	if m == nil {
		t.Fatalf("serve printed no setup token:\n%s", l.logs)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, _ := post(t, c, l.url+"/setup", url.Values{"token": {m[1]}, "name": {"ada"}, "password": {"correct horse battery"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("creating the first admin: %s", resp.Status)
	}
	_, page := get(t, c, l.url+"/agents/demo")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no form token on the page:\n%s", page)
	}
	return c, csrf[1]
}

func post(t testing.TB, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func get(t testing.TB, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var permissionForm = regexp.MustCompile(`action="/sessions/\w+/permissions/(\w+)"`)

// TestPermissionRequestEndsWithItsTurn: a permission request waits on the
// session's page while no one answers it (the list marks the session as
// waiting for a person), and the session takes no other
// prompt meanwhile; when its turn ends (the session is ended), it is gone
// from the page, and an answer to it says it no longer waits and changes
// nothing.
func TestPermissionRequestEndsWithItsTurn(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	if out := l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello"); !strings.Contains(out, "echo: hello") {
		t.Fatalf("run --server:\n%s", out)
	}
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })
	c, csrf := l.signedIn(t)
	resp, page := post(t, c, l.url+"/sessions/"+id+"/prompt", url.Values{"csrf": {csrf}, "text": {"/permission Delete the branch"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the prompt: %s\n%s", resp.Status, page)
	}
	_, page = get(t, c, l.url+"/sessions/"+id)
	m := permissionForm.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "The agent asks permission: Delete the branch") {
		t.Fatalf("no permission request on the page:\n%s", page)
	}
	// The list marks the session as waiting for a person.
	if _, list := get(t, c, l.url+"/sessions"); !strings.Contains(list, `<span class="badge waits">Waits for you</span> <small>a permission request waits on its page</small>`) {
		t.Fatalf("the list does not mark the session waiting:\n%s", list)
	}
	// The terminal is refused while the page's turn runs, and told who
	// holds the session and until when.
	out, err := exec.Command(l.bin, "run", "--server", l.url, "--token", l.token, "--agent", "demo", "--session", id, "meanwhile").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in another front end (blaise-agent dashboard, since ") ||
		!strings.Contains(string(out), "it is free once that client leaves, or after 5m0s without a message from it") {
		t.Fatalf("run --server --session during the page's turn: %v\n%s", err, out)
	}
	// A session takes one prompt at a time.
	if resp, page := post(t, c, l.url+"/sessions/"+id+"/prompt", url.Values{"csrf": {csrf}, "text": {"meanwhile"}}); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(page, "Nothing was sent: a prompt sent from this dashboard is still running in the session") {
		t.Fatalf("a second prompt during the turn: %s\n%s", resp.Status, page)
	}
	if resp, page := post(t, c, l.url+"/sessions/"+id+"/end", url.Values{"csrf": {csrf}, "confirmed": {"yes"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ending the session: %s\n%s", resp.Status, page)
	}
	testsupport.Eventually(t, "the request leaves the page", func() bool {
		_, page := get(t, c, l.url+"/sessions/"+id)
		return !permissionForm.MatchString(page)
	})
	resp, page = post(t, c, l.url+"/sessions/"+id+"/permissions/"+m[1], url.Values{"csrf": {csrf}, "option": {"allow_once"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "it no longer waits for an answer") {
		t.Fatalf("answering after the turn ended: %s\n%s", resp.Status, page)
	}
	if rec := l.session(id); rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Closed {
		t.Fatalf("the session: %s (%s)", rec.State, rec.EndReason)
	}
}

// TestRunServerIsNamedAsTheSessionsHolder: while `run --server` runs a
// turn, the dashboard's prompt to the session is refused, naming the
// terminal's client (blaise-agent and its version, from its initialize).
func TestRunServerIsNamedAsTheSessionsHolder(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	out := &testsupport.Buffer{}
	run := exec.Command(l.bin, "run", "--server", l.url, "--token", l.token, "--agent", "demo", "/say waiting now\n/sleep 600000")
	run.Stdout, run.Stderr = out, out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Kill()
		_ = run.Wait()
	})
	testsupport.Eventually(t, "the turn of run --server starts", func() bool { return strings.Contains(out.String(), "waiting now") })
	id := l.sessions()[0].ID
	c, csrf := l.signedIn(t)
	resp, page := post(t, c, l.url+"/sessions/"+id+"/prompt", url.Values{"csrf": {csrf}, "text": {"meanwhile"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "in another front end (blaise-agent ") || strings.Contains(page, "blaise-agent dashboard") {
		t.Fatalf("a prompt from the page while run --server holds the session: %s\n%s", resp.Status, page)
	}
}

// TestSessionEventsResumeAfterReconnecting: against a real `serve`,
// runner and demo agent, a session page's events carry ids; a browser that
// reconnects with the last one (Last-Event-ID, as EventSource does) is
// sent the turns after it, not again the ones it saw.
func TestSessionEventsResumeAfterReconnecting(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second)
	l.runner("r1", "blaise.star")
	c, sid := l.openAfter("first words")
	browser, _ := l.signedIn(t)
	events := "/sessions/" + sid + "/events"
	next := followEvents(t, browser, l.url+events, "")
	if e := next(); e.name != "reset" || !strings.Contains(e.text, "echo: first words") || e.id == "" {
		t.Fatalf("the first event: %+v", e)
	}
	if _, resp := c.Turn(3, sid, "second words"); resp.Error != nil {
		t.Fatalf("turn: %s", resp.Raw)
	}
	var seen sseEvent
	for !strings.Contains(seen.text, "echo: second words") {
		seen = next()
	}
	if _, resp := c.Turn(4, sid, "third words"); resp.Error != nil {
		t.Fatalf("turn: %s", resp.Raw)
	}
	again := followEvents(t, browser, l.url+events, seen.id)
	var after strings.Builder
	for !strings.Contains(after.String(), "echo: third words") {
		e := again()
		if e.name != "append" {
			t.Fatalf("after reconnecting with Last-Event-ID %s: %s event", seen.id, e.name)
		}
		after.WriteString(e.text)
	}
	if strings.Contains(after.String(), "second words") {
		t.Fatalf("after reconnecting with Last-Event-ID %s, the turn seen before comes again:\n%s", seen.id, after.String())
	}
}

// sseEvent is a server-sent event: its name, the stream's last id, its
// text.
type sseEvent struct{ name, id, text string }

// followEvents opens a session page's event stream as a browser that
// reconnects after the event lastID ("": none), and returns a reader of
// its next transcript event (reset or append).
func followEvents(t *testing.T, c *http.Client, u, lastID string) func() sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	rd := bufio.NewReader(resp.Body)
	id := lastID
	return func() sseEvent {
		t.Helper()
		var name, data string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			switch line = strings.TrimSuffix(line, "\n"); {
			case line == "" && (name == "reset" || name == "append"):
				var text string
				if err := json.Unmarshal([]byte(data), &text); err != nil {
					t.Fatalf("event %s: %v", name, err)
				}
				return sseEvent{name, id, text}
			case line == "":
				name, data = "", ""
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}
}
