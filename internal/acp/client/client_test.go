package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// A session is a Conn and a Terminal connected to a demo agent, with an
// initialized session whose cwd is root.
type session struct {
	t         *testing.T
	ctx       context.Context
	conn      *Conn
	term      *Terminal
	out, errs *testsupport.Buffer
	root      string
	id        string
}

// newSession starts a demo agent and a session with it; setup adjusts the
// Terminal before the connection starts.
func newSession(t *testing.T, setup func(s *session)) *session {
	t.Helper()
	s := &session{t: t, out: new(testsupport.Buffer), errs: new(testsupport.Buffer), root: t.TempDir()}
	s.term = &Terminal{Out: s.out, Err: s.errs, Root: s.root}
	if setup != nil {
		setup(s)
	}
	stateDir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s.ctx = ctx
	agentInR, agentInW := io.Pipe()
	agentOutR, agentOutW := io.Pipe()
	agentDone := make(chan error, 1)
	go func() {
		err := demoagent.Run(ctx, agentInR, agentOutW, demoagent.Options{StateDir: stateDir})
		agentOutW.Close()
		agentDone <- err
	}()
	s.conn = NewConn(agentOutR, agentInW, s.term)
	runDone := make(chan error, 1)
	go func() { runDone <- s.conn.Run(ctx) }()
	t.Cleanup(func() {
		agentInW.Close()
		if err := <-agentDone; err != nil {
			t.Errorf("demoagent.Run: %v", err)
		}
		if err := <-runDone; err != nil {
			t.Errorf("Conn.Run: %v", err)
		}
		cancel()
	})

	s.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": s.term.Capabilities()})
	var res struct {
		SessionID string `json:"sessionId"`
	}
	s.decode(s.call("session/new", map[string]any{"cwd": s.root, "mcpServers": []any{}}), &res)
	s.id = res.SessionID
	return s
}

func (s *session) call(method string, params any) json.RawMessage {
	s.t.Helper()
	res, err := s.conn.Call(s.ctx, method, params)
	if err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
	return res
}

func (s *session) decode(raw json.RawMessage, v any) {
	s.t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		s.t.Fatalf("decode %s: %v", raw, err)
	}
}

// prompt runs a prompt turn and returns its stop reason and what the
// Terminal rendered, after EndTurn.
func (s *session) prompt(text string) (stopReason, out string) {
	s.t.Helper()
	raw := s.call("session/prompt", map[string]any{
		"sessionId": s.id,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	})
	var res struct {
		StopReason string `json:"stopReason"`
	}
	s.decode(raw, &res)
	s.term.EndTurn(res.StopReason)
	return res.StopReason, s.out.Take()
}

// expect runs a prompt that must end the turn and checks the rendering.
func (s *session) expect(text, want string) {
	s.t.Helper()
	stop, got := s.prompt(text)
	if stop != "end_turn" {
		s.t.Errorf("prompt %q: stopReason %q, want end_turn", text, stop)
	}
	if got != want {
		s.t.Errorf("prompt %q rendered\n%s\nwant\n%s", text, quoteLines(got), quoteLines(want))
	}
}

// quoteLines shows text one quoted line at a time.
func quoteLines(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		b.WriteString("\t" + strconvQuote(l) + "\n")
	}
	return b.String()
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestRenderPrompts(t *testing.T) {
	s := newSession(t, nil)
	tests := []struct{ prompt, want string }{
		{"hello", "echo: hello\n"},
		{"hello\nworld", "echo: helloecho: world\n"},
		{"/think let me see", "thinking: let me see\n"},
		{"hi\n/think hmm\nbye", "echo: hi\nthinking: hmm\necho: bye\n"},
		{"/plan read the code; fix the bug; run the tests",
			"plan:\n  1. [ ] read the code\n  2. [ ] fix the bug\n  3. [ ] run the tests\n"},
		{"/tool grep", "• grep [other] (pending)\n  ↳ completed\n    grep: done\n"},
		{"/tool", "• demo-tool [other] (pending)\n  ↳ completed\n    demo-tool: done\n"},
		{"/chunks 3", "chunk 1chunk 2chunk 3\n"},
		{"working\n/plan a; b\n/chunks 2", "echo: working\nplan:\n  1. [ ] a\n  2. [ ] b\nchunk 1chunk 2\n"},
		{"hello\n/tool build\n/think next\n/chunks 2",
			"echo: hello\n• build [other] (pending)\n  ↳ completed\n    build: done\nthinking: next\nchunk 1chunk 2\n"},
		{"/ext hi", "ext: sent _demo/ping\n"},
	}
	for _, tt := range tests {
		s.expect(tt.prompt, tt.want)
	}
	if got := s.errs.Take(); got != "" {
		t.Errorf("diagnostics: %q", got)
	}
}

func TestRenderColor(t *testing.T) {
	s := newSession(t, func(s *session) { s.term.Color = true })
	s.expect("/think deep", "\x1b[2;3mthinking: \x1b[0m\x1b[2;3mdeep\x1b[0m\n")
	s.expect("/tool x", "\x1b[36m•\x1b[0m \x1b[1mx\x1b[0m \x1b[2m[other]\x1b[0m \x1b[2m(pending)\x1b[0m\n"+
		"  ↳ \x1b[32mcompleted\x1b[0m\n    x: done\n")
}

func TestRenderLoadReplay(t *testing.T) {
	s := newSession(t, nil)
	s.expect("hello", "echo: hello\n")
	s.expect("/tool grep\n/think ok", "• grep [other] (pending)\n  ↳ completed\n    grep: done\nthinking: ok\n")
	s.call("session/load", map[string]any{"sessionId": s.id, "cwd": s.root, "mcpServers": []any{}})
	s.term.EndTurn("")
	want := "> hello\necho: hello\n" +
		"> /tool grep\n> /think ok\n• grep [other] (pending)\n  ↳ completed\n    grep: done\nthinking: ok\n"
	if got := s.out.Take(); got != want {
		t.Errorf("replay rendered\n%s\nwant\n%s", quoteLines(got), quoteLines(want))
	}
}

// askWith returns an Ask that answers with the given lines in turn, echoing
// the question and the answer to out as a terminal would, and io.EOF after
// the last.
func askWith(out *testsupport.Buffer, answers ...string) func(context.Context, string) (string, error) {
	var mu sync.Mutex
	return func(_ context.Context, q string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(answers) == 0 {
			out.WriteString(q)
			return "", io.EOF
		}
		a := answers[0]
		answers = answers[1:]
		out.WriteString(q + a + "\n")
		return a, nil
	}
}

const permissionHeader = "permission requested: demo permission request\n  [y] Allow once\n  [n] Reject once\n"

func TestPermissionAsk(t *testing.T) {
	tests := []struct {
		name    string
		answers []string
		want    string
	}{
		{"yes", []string{"y"}, "allow? [y/n] y\npermission: allow_once\n"},
		{"Yes", []string{" YES "}, "allow? [y/n]  YES \npermission: allow_once\n"},
		{"no", []string{"n"}, "allow? [y/n] n\npermission: reject_once\n"},
		{"again", []string{"maybe", "", "y"},
			"allow? [y/n] maybe\n  answer y or n\nallow? [y/n] \n  answer y or n\nallow? [y/n] y\npermission: allow_once\n"},
		{"give up", []string{"a", "b", "c"},
			"allow? [y/n] a\n  answer y or n\nallow? [y/n] b\n  answer y or n\nallow? [y/n] c\n  answer y or n\npermission: cancelled\n"},
		{"eof", nil, "allow? [y/n] cancelled\npermission: cancelled\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, func(s *session) { s.term.Ask = askWith(s.out, tt.answers...) })
			s.expect("/permission", permissionHeader+tt.want)
		})
	}
}

func TestPermissionDefault(t *testing.T) {
	never := func(_ context.Context, q string) (string, error) {
		t.Errorf("Ask(%q) called despite a Default", q)
		return "", io.EOF
	}
	tests := []struct {
		def  string
		ask  func(context.Context, string) (string, error)
		want string
	}{
		{"allow", never, "allow? [y/n] y (default)\npermission: allow_once\n"},
		{"allow", nil, "allow? [y/n] y (default)\npermission: allow_once\n"},
		{"deny", never, "allow? [y/n] n (default)\npermission: reject_once\n"},
		{"", nil, "allow? [y/n] cancelled (no one to ask)\npermission: cancelled\n"},
	}
	for _, tt := range tests {
		s := newSession(t, func(s *session) { s.term.Default, s.term.Ask = tt.def, tt.ask })
		s.expect("/permission", permissionHeader+tt.want)
	}
}

func TestPermissionTitleAndMore(t *testing.T) {
	s := newSession(t, func(s *session) { s.term.Ask = askWith(s.out, "y") })
	s.expect("before\n/permission rm -rf build\nafter",
		"echo: before\npermission requested: rm -rf build\n  [y] Allow once\n  [n] Reject once\n"+
			"allow? [y/n] y\npermission: allow_onceecho: after\n")
}

func TestPermissionCancelPrompts(t *testing.T) {
	asked := make(chan struct{})
	release := make(chan struct{})
	gaveUp := make(chan struct{})
	s := newSession(t, func(s *session) {
		s.term.Ask = func(ctx context.Context, q string) (string, error) {
			s.out.WriteString(q)
			close(asked)
			select {
			case <-release:
				return "y", nil
			case <-ctx.Done():
				// The person's next line is not taken.
				close(gaveUp)
				return "", ctx.Err()
			}
		}
	})
	defer close(release)
	type result struct{ stop, out string }
	done := make(chan result, 1)
	go func() {
		stop, out := s.prompt("/permission\n/chunks 1")
		done <- result{stop, out}
	}()
	<-asked
	if err := s.conn.Cancel(s.id); err != nil {
		t.Fatal(err)
	}
	s.term.CancelPrompts()
	r := <-done
	select {
	case <-gaveUp:
	default:
		t.Error("Ask was not told to give up")
	}
	// The agent may or may not have seen session/cancel before the
	// cancelled answer; either way the person's prompt ends as cancelled.
	want := permissionHeader + "allow? [y/n] cancelled\npermission: cancelled\n"
	switch r.stop {
	case "cancelled":
		want += "· stopped: cancelled\n"
	case "end_turn":
		want += "chunk 1\n"
	default:
		t.Errorf("stopReason %q", r.stop)
	}
	if r.out != want {
		t.Errorf("rendered\n%s\nwant\n%s", quoteLines(r.out), quoteLines(want))
	}
}

func TestFiles(t *testing.T) {
	s := newSession(t, nil)
	root := s.root
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("line one\nline two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	secret := filepath.Join(other, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	refusal := func(path string) string {
		return `error: path is outside the session root (-32602) {"path":"` + path + `","root":"` + root + `"}`
	}

	s.expect("/read notes.txt", "read "+root+"/notes.txt: line one\nline two\n")
	s.expect("/read "+root+"/missing.txt",
		"read "+root+`/missing.txt: error: Resource not found (-32002) {"path":"`+root+`/missing.txt"}`+"\n")
	s.expect("/write sub/out.txt line one\\nline two", "write "+root+"/sub/out.txt: ok\n")
	if b, err := os.ReadFile(filepath.Join(root, "sub/out.txt")); err != nil || string(b) != "line one\nline two" {
		t.Errorf("written file: %q, %v", b, err)
	}
	s.expect("/read sub/out.txt", "read "+root+"/sub/out.txt: line one\nline two\n")
	if got := s.errs.Take(); got != "" {
		t.Errorf("diagnostics: %q", got)
	}

	// Outside the root: refused, also through ".." and symbolic links.
	s.expect("/read "+secret, "read "+secret+": "+refusal(secret)+"\n")
	dotdot := filepath.Join(filepath.Dir(root), filepath.Base(other), "secret.txt")
	s.expect("/read ../"+filepath.Base(other)+"/secret.txt", "read "+dotdot+": "+refusal(dotdot)+"\n")
	viaLink := filepath.Join(root, "link", "secret.txt")
	s.expect("/read link/secret.txt", "read "+viaLink+": "+refusal(viaLink)+"\n")
	evil := filepath.Join(other, "evil.txt")
	s.expect("/write "+evil+" boo", "write "+evil+": "+refusal(evil)+"\n")
	viaLinkNew := filepath.Join(root, "link", "new.txt")
	s.expect("/write link/new.txt boo", "write "+viaLinkNew+": "+refusal(viaLinkNew)+"\n")
	for _, p := range []string{evil, filepath.Join(other, "new.txt")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written: %v", p, err)
		}
	}
	wantErrs := "client: refused fs/read_text_file " + secret + ": outside " + root + "\n" +
		"client: refused fs/read_text_file " + dotdot + ": outside " + root + "\n" +
		"client: refused fs/read_text_file " + viaLink + ": a symbolic link leads outside " + root + "\n" +
		"client: refused fs/write_text_file " + evil + ": outside " + root + "\n" +
		"client: refused fs/write_text_file " + viaLinkNew + ": a symbolic link leads outside " + root + "\n"
	if got := s.errs.Take(); got != wantErrs {
		t.Errorf("diagnostics\n%s\nwant\n%s", quoteLines(got), quoteLines(wantErrs))
	}
}

// TestWithoutARootNoFileAccessIsOfferedAndNoneGiven: a terminal with no
// session root (a session on a server's runner) offers the agent no file
// access, so that the agent works with its files itself; and refuses a
// request that comes anyway.
func TestWithoutARootNoFileAccessIsOfferedAndNoneGiven(t *testing.T) {
	s := newSession(t, func(s *session) { s.term.Root = "" })
	p := filepath.Join(s.root, "x.txt")
	s.expect("/read x.txt", "read "+p+": error: client did not advertise fs.readTextFile\n")
	s.expect("/write x.txt hi", "write "+p+": error: client did not advertise fs.writeTextFile\n")
	_, err := s.term.Request(t.Context(), "fs/read_text_file", []byte(`{"sessionId":"s","path":"`+p+`"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Message != "path is outside the session root" {
		t.Fatalf("a read asked anyway: %v", err)
	}
	if got, want := s.errs.Take(), "client: refused fs/read_text_file "+p+": no session root\n"; got != want {
		t.Errorf("diagnostics %q, want %q", got, want)
	}
}

func TestReadLines(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "f.txt")
	if err := os.WriteFile(path, []byte("1\n2\n3\n4"), 0o644); err != nil {
		t.Fatal(err)
	}
	term := &Terminal{Root: root}
	tests := []struct {
		params string
		want   string
	}{
		{`{}`, "1\n2\n3\n4"},
		{`{"line":2}`, "2\n3\n4"},
		{`{"line":2,"limit":2}`, "2\n3\n"},
		{`{"limit":1}`, "1\n"},
		{`{"limit":0}`, ""},
		{`{"line":4,"limit":5}`, "4"},
		{`{"line":9}`, ""},
	}
	for _, tt := range tests {
		params := `{"sessionId":"s","path":"` + path + `",` + strings.TrimPrefix(tt.params, "{")
		params = strings.Replace(params, `",}`, `"}`, 1)
		res, err := term.Request(context.Background(), "fs/read_text_file", json.RawMessage(params))
		if err != nil {
			t.Errorf("%s: %v", tt.params, err)
			continue
		}
		b, _ := json.Marshal(res)
		var got struct{ Content string }
		json.Unmarshal(b, &got)
		if got.Content != tt.want {
			t.Errorf("%s: content %q, want %q", tt.params, got.Content, tt.want)
		}
	}
	for _, params := range []string{`{"line":0}`, `{"limit":-1}`} {
		p := `{"sessionId":"s","path":"` + path + `",` + strings.TrimPrefix(params, "{")
		_, err := term.Request(context.Background(), "fs/read_text_file", json.RawMessage(p))
		if e, ok := errors.AsType[*RPCError](err); !ok || e.Code != -32602 {
			t.Errorf("%s: error %v, want -32602", params, err)
		}
	}
	_, err := term.Request(context.Background(), "fs/read_text_file", json.RawMessage(`{"sessionId":"s","path":"f.txt"}`))
	if e, ok := errors.AsType[*RPCError](err); !ok || e.Code != -32602 || e.Message != "path must be absolute" {
		t.Errorf("relative path: error %v", err)
	}
	// A Root reached through a symbolic link: both spellings are inside.
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	linked := &Terminal{Root: link}
	for _, p := range []string{path, filepath.Join(link, "f.txt")} {
		if _, err := linked.Request(context.Background(), "fs/read_text_file",
			json.RawMessage(`{"sessionId":"s","path":"`+p+`"}`)); err != nil {
			t.Errorf("read %s with Root %s: %v", p, link, err)
		}
	}
	if _, err := term.Request(context.Background(), "terminal/create", nil); !errors.Is(err, ErrMethodNotFound) {
		t.Errorf("terminal/create: %v, want ErrMethodNotFound", err)
	}
}

// TestPermissionYesChoosesAllowOnceWhateverTheOrder: Claude Code lists
// "Always Allow" first; --yes, a "y" at the prompt and --no still choose
// the *_once options, so one answer never becomes a standing grant. A
// number still chooses any option.
func TestPermissionYesChoosesAllowOnceWhateverTheOrder(t *testing.T) {
	params := json.RawMessage(`{"sessionId":"s","toolCall":{"toolCallId":"toolu_01","title":"Write /w/hello.txt","rawInput":{"file_path":"/w/hello.txt","content":"hi"}},"options":[
		{"kind":"allow_always","name":"Always Allow","optionId":"allow_always"},
		{"kind":"allow_once","name":"Allow","optionId":"allow"},
		{"kind":"reject_always","name":"Never","optionId":"never"},
		{"kind":"reject_once","name":"Reject","optionId":"reject"}]}`)
	tests := []struct {
		def     string
		answers []string
		outcome string
	}{
		{"allow", nil, "allow"},
		{"deny", nil, "reject"},
		{"", []string{"y"}, "allow"},
		{"", []string{"yes"}, "allow"},
		{"", []string{"n"}, "reject"},
		{"", []string{"1"}, "allow_always"},
	}
	for _, tt := range tests {
		out := new(testsupport.Buffer)
		term := &Terminal{Out: out, Ask: askWith(out, tt.answers...), Default: tt.def}
		res, err := term.Request(context.Background(), "session/request_permission", params)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"outcome":{"optionId":"` + tt.outcome + `","outcome":"selected"}}`
		if b, _ := json.Marshal(res); string(b) != want {
			t.Errorf("default %q, answers %v: outcome %s, want %s", tt.def, tt.answers, b, want)
		}
	}

	// Only the standing grants on offer: they are what there is.
	out := new(testsupport.Buffer)
	term := &Terminal{Out: out, Default: "allow"}
	res, err := term.Request(context.Background(), "session/request_permission", json.RawMessage(
		`{"sessionId":"s","toolCall":{"toolCallId":"c"},"options":[{"kind":"reject_once","name":"No","optionId":"no"},{"kind":"allow_always","name":"Always","optionId":"always"}]}`))
	if b, _ := json.Marshal(res); err != nil || string(b) != `{"outcome":{"optionId":"always","outcome":"selected"}}` {
		t.Errorf("outcome %s, %v", b, err)
	}
}

func TestPermissionMenu(t *testing.T) {
	params := json.RawMessage(`{"sessionId":"s","toolCall":{"toolCallId":"call-1","title":"edit main.go"},"options":[
		{"kind":"allow_once","name":"Allow once","optionId":"a1"},
		{"kind":"allow_always","name":"Always allow","optionId":"a2"},
		{"kind":"reject_once","name":"Reject","optionId":"r1"}]}`)
	header := "permission requested: edit main.go\n  [1] Allow once\n  [2] Always allow\n  [3] Reject\n"
	tests := []struct {
		answers []string
		def     string
		want    string
		outcome string
	}{
		{[]string{"2"}, "", "choose [1-3]: 2\n", `{"outcome":{"optionId":"a2","outcome":"selected"}}`},
		{[]string{"n"}, "", "choose [1-3]: n\n", `{"outcome":{"optionId":"r1","outcome":"selected"}}`},
		{[]string{"4", "y"}, "", "choose [1-3]: 4\n  answer a number from 1 to 3\nchoose [1-3]: y\n",
			`{"outcome":{"optionId":"a1","outcome":"selected"}}`},
		{nil, "deny", "choose [1-3]: 3 (default)\n", `{"outcome":{"optionId":"r1","outcome":"selected"}}`},
	}
	for _, tt := range tests {
		out := new(testsupport.Buffer)
		term := &Terminal{Out: out, Ask: askWith(out, tt.answers...), Default: tt.def}
		res, err := term.Request(context.Background(), "session/request_permission", params)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(res); string(b) != tt.outcome {
			t.Errorf("%v: outcome %s, want %s", tt.answers, b, tt.outcome)
		}
		if got := out.Take(); got != header+tt.want {
			t.Errorf("%v: rendered\n%s\nwant\n%s", tt.answers, quoteLines(got), quoteLines(header+tt.want))
		}
	}

	// Only allow options and --no: no option fits.
	out := new(testsupport.Buffer)
	term := &Terminal{Out: out, Default: "deny"}
	res, err := term.Request(context.Background(), "session/request_permission", json.RawMessage(
		`{"sessionId":"s","toolCall":{"toolCallId":"call-1"},"options":[{"kind":"allow_once","name":"Go","optionId":"go"}]}`))
	if b, _ := json.Marshal(res); err != nil || string(b) != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("outcome %s, %v", b, err)
	}
	if got, want := out.Take(), "permission requested: call-1\n  [1] Go\nchoose [1-1]: cancelled (no deny option)\n"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}

	// No options at all.
	out = new(testsupport.Buffer)
	term = &Terminal{Out: out, Ask: askWith(out, "y")}
	res, err = term.Request(context.Background(), "session/request_permission", json.RawMessage(
		`{"sessionId":"s","toolCall":{"toolCallId":"call-1","title":"x"},"options":[]}`))
	if b, _ := json.Marshal(res); err != nil || string(b) != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("outcome %s, %v", b, err)
	}
	if got, want := out.Take(), "permission requested: x\ncancelled (no options)\n"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}

	// A request the agent cancels ($/cancel_request) while the person thinks.
	out = new(testsupport.Buffer)
	term = &Terminal{Out: out, Ask: func(ctx context.Context, q string) (string, error) {
		out.WriteString(q)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err = term.Request(ctx, "session/request_permission", params)
	if b, _ := json.Marshal(res); err != nil || string(b) != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("outcome %s, %v", b, err)
	}
	if got, want := out.Take(), header+"choose [1-3]: cancelled\n"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}

// TestRenderUpdates feeds the Terminal updates the demo agent does not send.
func TestRenderUpdates(t *testing.T) {
	tests := []struct {
		name    string
		updates []string
		want    string
	}{
		{"thought lines", []string{
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Let me"}}`,
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"first\nsec"}}`,
			`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"ond\n\nthird\n"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" see."}}`,
		}, "Let me\nthinking: first\n          second\n\n          third\n see.\n"},
		{"user lines", []string{
			`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"fix\nthe bug"}}`,
			`{"sessionUpdate":"user_message_chunk","content":{"type":"resource_link","name":"a","uri":"file:///a.go"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok\n"}}`,
		}, "> fix\n> the bug[link file:///a.go]\nok\n"},
		{"content blocks", []string{
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"resource","resource":{"uri":"file:///r","text":"x"}}}`,
		}, "[image image/png][resource file:///r]\n"},
		{"tool calls", []string{
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"running"}}`,
			`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"go test","kind":"execute","status":"in_progress"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c1","content":[{"type":"content","content":{"type":"text","text":"ok  pkg\n\nPASS\n"}}]}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c1","title":"go test ./...","status":"failed"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"c1","rawOutput":{"x":1}}`,
			`{"sessionUpdate":"tool_call","toolCallId":"c2","title":"","content":[{"type":"diff","path":"/a.go","newText":"x"},{"type":"terminal","terminalId":"t1"}]}`,
		}, "running\n• go test [execute] (in_progress)\n    ok  pkg\n\n    PASS\n  ↳ go test ./... (failed)\n• c2\n    [diff /a.go]\n    [terminal t1]\n"},
		{"plan statuses", []string{
			`{"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"completed"},{"content":"b","priority":"low","status":"in_progress"},{"content":"c","priority":"low","status":"pending"}]}`,
			`{"sessionUpdate":"plan","entries":[]}`,
		}, "plan:\n  1. [x] a\n  2. [~] b\n  3. [ ] c\nplan: (empty)\n"},
		{"one-liners and silence", []string{
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}`,
			`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web","description":"search"}]}`,
			`{"sessionUpdate":"config_option_update","configOptions":[]}`,
			`{"sessionUpdate":"usage_update","used":10,"size":100}`,
			`{"sessionUpdate":"some_future_kind","title":"t"}`,
			`{"sessionUpdate":"session_info_update","updatedAt":"2026-01-01T00:00:00Z"}`,
			`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"y"}}`,
			`{"sessionUpdate":"current_mode_update","currentModeId":"code"}`,
			`{"sessionUpdate":"session_info_update","title":"Fix the bug"}`,
		}, "xy\n· mode: code\n· title: Fix the bug\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := new(testsupport.Buffer), new(testsupport.Buffer)
			term := &Terminal{Out: out, Err: errs}
			for _, u := range tt.updates {
				term.Notification("session/update", json.RawMessage(`{"sessionId":"s","update":`+u+`}`))
			}
			term.EndTurn("end_turn")
			if got := out.Take(); got != tt.want {
				t.Errorf("rendered\n%s\nwant\n%s", quoteLines(got), quoteLines(tt.want))
			}
			if got := errs.Take(); got != "" {
				t.Errorf("diagnostics: %q", got)
			}
		})
	}
}

func TestRenderMalformed(t *testing.T) {
	out, errs := new(testsupport.Buffer), new(testsupport.Buffer)
	term := &Terminal{Out: out, Err: errs}
	term.Notification("session/update", json.RawMessage(`{"sessionId":"s"}`))
	term.Notification("session/update", json.RawMessage(`{"sessionId":"s","update":{"sessionUpdate":"plan","entries":7}}`))
	term.Notification("_demo/ping", json.RawMessage(`{"text":"hi"}`))
	term.Notice("interrupted")
	term.EndTurn("cancelled")
	if got, want := out.Take(), "interrupted\n· stopped: cancelled\n"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
	got := errs.Take()
	if n := strings.Count(got, "client: malformed session/update"); n != 2 {
		t.Errorf("diagnostics %q: want 2 malformed updates", got)
	}
}
