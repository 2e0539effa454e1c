package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// lspClient is an editor: it speaks LSP to a real `blaise-agent lsp`
// process over its stdin and stdout, in the directory dir.
type lspClient struct {
	t       testing.TB
	ctx     context.Context // cancelled when the server exits
	dir     string
	conn    jsonrpc2.Conn
	diags   chan protocol.PublishDiagnosticsParams
	version map[protocol.DocumentURI]int32
	latest  map[protocol.DocumentURI][]protocol.Diagnostic // the last received, by document
}

type pipes struct {
	io.Reader
	io.WriteCloser
}

// startLSP starts `blaise-agent lsp` in a directory holding files, and
// initializes it. The process must exit with status 0 after shutdown and
// exit, which the cleanup checks.
func startLSP(t testing.TB, files map[string]string) *lspClient {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		writeFile(t, filepath.Join(dir, name), text)
	}
	cmd := exec.Command(self(t), "lsp")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, out := startPiped(t, cmd)
	ctx, cancel := context.WithCancel(context.Background())
	c := &lspClient{t: t, ctx: ctx, dir: dir, diags: make(chan protocol.PublishDiagnosticsParams, 100), version: map[protocol.DocumentURI]int32{}, latest: map[protocol.DocumentURI][]protocol.Diagnostic{}}
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(pipes{out, in}))
	c.conn.Go(context.Background(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() == protocol.MethodTextDocumentPublishDiagnostics {
			var p protocol.PublishDiagnosticsParams
			if err := json.Unmarshal(req.Params(), &p); err != nil {
				t.Errorf("publishDiagnostics: %v", err)
			}
			c.diags <- p
		}
		return reply(ctx, nil, nil)
	})
	// A server that dies fails the calls waiting for it, and the test.
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		cancel()
		c.conn.Close()
		exited <- err
	}()
	t.Cleanup(func() {
		if _, err := c.conn.Call(c.ctx, protocol.MethodShutdown, nil, nil); err == nil {
			_ = c.conn.Notify(c.ctx, protocol.MethodExit, nil)
		}
		if err := <-exited; err != nil {
			t.Errorf("blaise-agent lsp: %v; stderr:\n%s", err, stderr.String())
		}
	})
	var res protocol.InitializeResult
	c.call(protocol.MethodInitialize, &protocol.InitializeParams{RootURI: uri.File(dir)}, &res)
	if !res.Capabilities.HoverProvider.(bool) || res.Capabilities.CompletionProvider == nil {
		t.Fatalf("initialize: capabilities %+v", res.Capabilities)
	}
	if err := c.conn.Notify(context.Background(), protocol.MethodInitialized, &protocol.InitializedParams{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// startPiped starts cmd with pipes to its stdin and from its stdout.
func startPiped(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
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
	return in, out
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *lspClient) call(method string, params, result any) {
	c.t.Helper()
	if _, err := c.conn.Call(c.ctx, method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *lspClient) uri(name string) protocol.DocumentURI {
	return uri.File(filepath.Join(c.dir, name))
}

// open opens the file name as it is on disk and returns its first diagnostics.
func (c *lspClient) open(name string) []protocol.Diagnostic {
	c.t.Helper()
	text, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		c.t.Fatal(err)
	}
	u := c.uri(name)
	c.version[u] = 1
	if err := c.conn.Notify(context.Background(), protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{
		TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: "starlark", Version: 1, Text: string(text)},
	}); err != nil {
		c.t.Fatal(err)
	}
	return c.diagnostics(u)
}

// edit replaces the text of the open document name, as an editor sends
// each keystroke, and returns the diagnostics of that version.
func (c *lspClient) edit(name, text string) []protocol.Diagnostic {
	c.t.Helper()
	u := c.uri(name)
	c.version[u]++
	if err := c.conn.Notify(context.Background(), protocol.MethodTextDocumentDidChange, &protocol.DidChangeTextDocumentParams{
		TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: c.version[u]},
		ContentChanges: []protocol.TextDocumentContentChangeEvent{{Text: text}},
	}); err != nil {
		c.t.Fatal(err)
	}
	return c.diagnostics(u)
}

// diagnostics waits for those of the current version of u; the server
// sends those of the other open documents before. The deadline
// only stops a broken server from hanging the test.
func (c *lspClient) diagnostics(u protocol.DocumentURI) []protocol.Diagnostic {
	c.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case p := <-c.diags:
			c.latest[p.URI] = p.Diagnostics
			if p.URI == u && int32(p.Version) == c.version[u] {
				return p.Diagnostics
			}
		case <-c.ctx.Done():
			c.t.Fatalf("the server exited before the diagnostics for %s version %d", u, c.version[u])
		case <-deadline:
			c.t.Fatalf("no diagnostics for %s version %d", u, c.version[u])
		}
	}
}

// at returns the position of the end of the last occurrence of mark in
// the text of name, the place a cursor stands after typing it.
func (c *lspClient) at(name, text, mark string) protocol.TextDocumentPositionParams {
	c.t.Helper()
	i := strings.LastIndex(text, mark)
	if i < 0 {
		c.t.Fatalf("%q not in %s", mark, name)
	}
	before := text[:i+len(mark)]
	line := strings.Count(before, "\n")
	col := len(utf16.Encode([]rune(before[strings.LastIndex(before, "\n")+1:]))) // as LSP counts
	return protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: c.uri(name)}, Position: protocol.Position{Line: uint32(line), Character: uint32(col)}}
}

func (c *lspClient) complete(name, text, mark string) map[string]protocol.CompletionItem {
	c.t.Helper()
	var list protocol.CompletionList
	c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: c.at(name, text, mark)}, &list)
	items := map[string]protocol.CompletionItem{}
	for _, it := range list.Items {
		items[it.Label] = it
	}
	return items
}

func (c *lspClient) hover(name, text, mark string) string {
	c.t.Helper()
	var h *protocol.Hover
	c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: c.at(name, text, mark)}, &h)
	if h == nil {
		return ""
	}
	var mc protocol.MarkupContent
	b, _ := json.Marshal(h.Contents)
	if err := json.Unmarshal(b, &mc); err != nil {
		c.t.Fatal(err)
	}
	return mc.Value
}

func (c *lspClient) definition(name, text, mark string) []protocol.Location {
	c.t.Helper()
	var locs []protocol.Location
	c.call(protocol.MethodTextDocumentDefinition, &protocol.DefinitionParams{TextDocumentPositionParams: c.at(name, text, mark)}, &locs)
	return locs
}

func docOf(it protocol.CompletionItem) string {
	b, _ := json.Marshal(it.Documentation)
	var mc protocol.MarkupContent
	_ = json.Unmarshal(b, &mc)
	return mc.Value
}

const lspPlug = `plug(
    name = "acme/deploy",
    inputs = schema.object(
        repo = schema.string(doc = "the repository to clone"),
        git = schema.object(branch = schema.string(default = "main", doc = "the branch to check out")),
    ),
    persisted = schema.object(vm = schema.optional(schema.string(doc = "the id of the VM"))),
)

def on_session(ctx, next):
    h = ctx.host
    p = h.spawn(["sleep", "1"])
    info = next()
    return info

def on_teardown(ctx, next):
    done = next()

def on_message(ctx, message, next):
    return next(message)
`

const lspConfig = `agent(command = "demo")
setup(use("./deploy.star", id = "d", inputs = {"repo": "acme/app"}))
`

// TestLspCompletesNamesWithTheirDocs: completion of predeclared
// names and of the attributes of ctx, message, hosts, fs, processes,
// PauseInfo and TeardownInfo, with the text of docs/plugs.md.
func TestLspCompletesNamesWithTheirDocs(t *testing.T) {
	t.Parallel()
	c := startLSP(t, map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig})
	if d := c.open("deploy.star"); len(d) != 0 {
		t.Fatalf("diagnostics of a good plug: %+v", d)
	}
	cases := []struct {
		text, mark string
		want       []string
		doc        string // in the documentation of want[0]
		not        []string
	}{
		{"    y = ctx.", "y = ctx.", []string{"state", "inputs", "persisted", "host", "runner", "set_output", "log", "signal"}, "per-run state returned by `on_load`", nil},
		{"    message.", "message.", []string{"method", "params", "replace", "direction", "kind"}, "the method, such as", nil},
		{"    info.", "info.", []string{"may_resume", "reason", "error"}, "`True` if the session may resume later", nil},
		{"    done.", "done.", []string{"reason", "error"}, "why the session ended", []string{"may_resume"}},
		{"    ctx.host.fs.", "host.fs.", []string{"read_file", "write_file", "mkdtemp"}, "the file's contents", nil},
		{"    h.", "    h.", []string{"exec", "spawn", "fs", "info", "forward"}, "Runs a command to completion", nil},
		{"    p.", "    p.", []string{"read_line", "wait", "kill", "pid"}, "the next line of stdout", nil},
		{"x = hosts.", "hosts.", []string{"command", "ssh"}, "", nil},
		{"x = schema.", "schema.", []string{"string", "object", "optional", "enum"}, "a string", nil},
		{"x = re.", "re.", []string{"compile", "sub"}, "", nil},
		{"x = path.", "path.", []string{"join", "within"}, "", nil},
		{"x = time.", "time.", []string{"now", "parse_duration"}, "go.starlark.net's time module", nil},
		{"x = json.", "json.", []string{"encode", "decode"}, "as JSON text", nil},
		{"x = req", "req", []string{"request_error"}, "", nil},
		{"x = s", "= s", []string{"schema", "struct"}, "", []string{"setup", "session"}},
		{"def on_t", "on_t", []string{"on_teardown"}, "Runs when the session is over", []string{"on_session"}},
	}
	for _, tc := range cases {
		// Completion happens while typing: the line is added where it
		// belongs, in the handler for indented lines, and the file need not parse.
		text := lspPlug + tc.text
		if strings.HasPrefix(tc.text, "    ") {
			anchor := map[string]string{"message.": "    return next(message)\n", "done.": "    done = next()\n"}[tc.mark]
			if anchor == "" {
				anchor = "    info = next()\n"
			}
			text = strings.Replace(lspPlug, anchor, anchor+tc.text+"\n", 1)
		}
		c.edit("deploy.star", text)
		items := c.complete("deploy.star", text, tc.mark)
		for _, w := range tc.want {
			if _, ok := items[w]; !ok {
				t.Errorf("%q: no completion %s among %v", tc.text, w, keys(items))
			}
		}
		for _, n := range tc.not {
			if _, ok := items[n]; ok {
				t.Errorf("%q: completion %s offered", tc.text, n)
			}
		}
		if tc.doc != "" && !strings.Contains(docOf(items[tc.want[0]]), tc.doc) {
			t.Errorf("%q: documentation of %s is %q, want it to contain %q", tc.text, tc.want[0], docOf(items[tc.want[0]]), tc.doc)
		}
	}
	// The configuration sees agent, setup, use and session.
	c.open("blaise.star")
	text := lspConfig + "se"
	c.edit("blaise.star", text)
	items := c.complete("blaise.star", text, "\nse")
	for _, w := range []string{"setup", "session"} {
		if _, ok := items[w]; !ok {
			t.Errorf("configuration: no completion %s among %v", w, keys(items))
		}
	}
}

// TestLspCompletesTheFieldsOfTheSchemas: ctx.inputs. completes the
// fields of the plug's inputs schema, ctx.persisted.value. those of its
// persisted schema, with their doc.
func TestLspCompletesTheFieldsOfTheSchemas(t *testing.T) {
	t.Parallel()
	c := startLSP(t, map[string]string{"deploy.star": lspPlug})
	c.open("deploy.star")
	for _, tc := range []struct{ line, mark, want, doc string }{
		{"    ctx.inputs.", "ctx.inputs.", "repo", "the repository to clone"},
		{"    ctx.inputs.git.", "git.", "branch", "the branch to check out"},
		{"    ctx.persisted.value.", "value.", "vm", "the id of the VM"},
	} {
		text := strings.Replace(lspPlug, "    h = ctx.host\n", "    h = ctx.host\n"+tc.line+"\n", 1)
		c.edit("deploy.star", text)
		items := c.complete("deploy.star", text, tc.mark)
		if docOf(items[tc.want]) != tc.doc {
			t.Errorf("%s: completions %v; %s has doc %q, want %q", tc.line, keys(items), tc.want, docOf(items[tc.want]), tc.doc)
		}
	}
}

// TestLspHoverShowsTheDocs: hover over predeclared names,
// attributes and schema fields shows their documentation; over the
// reference of a use(), the plug's inputs.
func TestLspHoverShowsTheDocs(t *testing.T) {
	t.Parallel()
	text := strings.Replace(lspPlug, "    h = ctx.host\n", "    h = ctx.host\n    r = ctx.inputs.repo\n    x = request_error(1, \"no\")\n", 1)
	c := startLSP(t, map[string]string{"deploy.star": text, "blaise.star": lspConfig})
	c.open("deploy.star")
	for _, tc := range []struct{ name, text, mark, want string }{
		{"deploy.star", text, "ctx.hos", "the host where the agent runs"},
		{"deploy.star", text, "ctx.inputs.re", "the repository to clone"},
		{"deploy.star", text, "h.spa", "host.spawn(argv, cwd = None, env = None)"},
		{"deploy.star", text, "request_er", "request_error(code, message, data = None)"},
		{"deploy.star", text, "schema.obj", "a dict (or record, or struct) with these fields"},
		{"deploy.star", text, "def on_sess", "Wraps one `start` or `resume` run"},
		{"blaise.star", lspConfig, "set", "Lists the chain"},
		{"blaise.star", lspConfig, "us", "use(ref, id = , inputs = )"},
		{"blaise.star", lspConfig, "./depl", "the repository to clone"}, // the plug's reference, as doc writes it
	} {
		if tc.name == "blaise.star" && c.version[c.uri(tc.name)] == 0 {
			c.open(tc.name)
		}
		if got := c.hover(tc.name, tc.text, tc.mark); !strings.Contains(got, tc.want) {
			t.Errorf("hover at %q: %q, want it to contain %q", tc.mark, got, tc.want)
		}
	}
}

// TestLspDiagnosesEachKindOfMistake: after each edit that brings
// in a mistake, the diagnostics say what `blaise-agent check` says of the
// same files on disk, at the mistake's line; mistakes only a run would meet
// (unknown attributes) say what the run would: the interpreter's message.
func TestLspDiagnosesEachKindOfMistake(t *testing.T) {
	t.Parallel()
	c := startLSP(t, map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig})
	if d := c.open("blaise.star"); len(d) != 0 {
		t.Fatalf("diagnostics of a good configuration: %+v", d)
	}
	c.open("deploy.star")
	cases := []struct {
		name, from, to string
		check          bool   // check reports it too
		want           string // when check cannot
	}{
		{"deploy.star", "    info = next()", "    info = next(", true, ""},
		{"deploy.star", "def on_teardown(ctx, next):", "def on_tear_down(ctx, next):", true, ""},
		{"deploy.star", "def on_session(ctx, next):", "def on_session(ctx):", true, ""},
		{"deploy.star", "    h = ctx.host", "    h = ctx.inptus", false, `ctx has no attribute "inptus" (did you mean .inputs?)`},
		{"deploy.star", "    return next(message)", "    return next(message.parms)", false, `message has no attribute "parms" (did you mean .params?)`},
		{"deploy.star", "    info = next()", "    info = next(host = hosts.comand([\"x\"]))", false, "module has no .comand field or method (did you mean .command?)"},
		{"deploy.star", "    p = h.spawn", "    p = h.fs.raed_file", false, "fs has no .raed_file field or method (did you mean .read_file?)"},
		{"deploy.star", "    info = next()", "    info = next()\n    ctx.inputs.reop", false, `inputs has no field "reop" (did you mean "repo"?)`},
		{"blaise.star", "./deploy.star", "./deploi.star", true, ""},
		{"blaise.star", `"acme/app"`, `42`, true, ""},
	}
	for _, tc := range cases {
		good := map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig}[tc.name]
		bad := strings.Replace(good, tc.from, tc.to, 1)
		line := strings.Count(bad[:strings.Index(bad, tc.to)+len(tc.to)], "\n") // the last line of the mistake
		want, out := tc.want, ""
		if tc.check {
			files := map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig, tc.name: bad}
			var err error
			out, err = c.check(files)
			if err == nil {
				t.Fatalf("%s: check passes", tc.to)
			}
			// FILE:LINE:COL: MESSAGE, perhaps inside the message of the
			// configuration that uses the file.
			m := regexp.MustCompile(regexp.QuoteMeta(tc.name) + `:(\d+):\d+: (.*)`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%s: check says %q", tc.to, out)
			}
			line, _ = strconv.Atoi(m[1])
			line, want = line-1, m[2]
		}
		diags := c.edit(tc.name, bad)
		if len(diags) != 1 || diags[0].Message != want || int(diags[0].Range.Start.Line) != line {
			t.Errorf("%s → %s: diagnostics %+v, want %q at line %d", tc.from, tc.to, diags, want, line)
		}
		if tc.check && tc.name == "deploy.star" {
			// The configuration open beside the plug sees the plug as edited.
			m := regexp.MustCompile(`blaise\.star:(\d+):\d+: (.*)`).FindStringSubmatch(out)
			if d := c.latest[c.uri("blaise.star")]; len(d) != 1 || d[0].Message != m[2] || d[0].Range.Start.Line != 1 {
				t.Errorf("%s → %s: diagnostics of blaise.star %+v, want %q at line 1", tc.from, tc.to, d, m[2])
			}
		}
		if d := c.edit(tc.name, good); len(d) != 0 {
			t.Errorf("after undoing %s: %+v", tc.to, d)
		}
	}
}

// TestLspWarnsAsCheckDoes: check's warnings (an on_message that can end
// without a return) are diagnostics of the plug's file, as warnings, with
// check's message and place; the configuration that uses the plug has
// none of its own.
func TestLspWarnsAsCheckDoes(t *testing.T) {
	t.Parallel()
	plug := "plug(name = \"acme/noreturn\")\n\ndef on_message(ctx, message, next):\n    next(message)\n"
	config := "agent(command = BLAISE_AGENT, args = [\"demo-agent\"])\nsetup(use(\"./noreturn.star\"))\n"
	c := startLSP(t, map[string]string{"noreturn.star": plug, "blaise.star": config})
	out, err := c.check(map[string]string{"noreturn.star": plug, "blaise.star": config})
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`warning: noreturn\.star:(\d+):\d+: (.*)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("check warns nothing:\n%s", out)
	}
	line, _ := strconv.Atoi(m[1])
	d := c.open("noreturn.star")
	if len(d) != 1 || d[0].Severity != protocol.DiagnosticSeverityWarning || d[0].Message != m[2] || int(d[0].Range.Start.Line) != line-1 {
		t.Fatalf("diagnostics %+v, want the warning %q at line %d", d, m[2], line-1)
	}
	if d := c.open("blaise.star"); len(d) != 0 {
		t.Errorf("diagnostics of the configuration: %+v", d)
	}
}

// TestLspDiagnosesModules: a module for load() is checked on its
// own, with check's messages, and helpers that take a ctx too.
func TestLspDiagnosesModules(t *testing.T) {
	t.Parallel()
	lib := "def greet(ctx, name):\n    ctx.log.info(name)\n    return name\n"
	config := "load(\"./lib.star\", \"greet\")\n\nagent(command = \"demo\")\n"
	c := startLSP(t, map[string]string{"lib.star": lib, "blaise.star": config})
	if d := c.open("lib.star"); len(d) != 0 {
		t.Fatalf("diagnostics of a good module: %+v", d)
	}
	bad := strings.Replace(lib, "return name", "return nmae", 1)
	out, err := c.check(map[string]string{"lib.star": bad, "blaise.star": config})
	m := regexp.MustCompile(`lib\.star:3:\d+: (.*)`).FindStringSubmatch(out)
	if err == nil || m == nil {
		t.Fatalf("check says %q", out)
	}
	if d := c.edit("lib.star", bad); len(d) != 1 || d[0].Message != m[1] || d[0].Range.Start.Line != 2 {
		t.Errorf("diagnostics %+v, want %q at line 2", d, m[1])
	}
	want := `ctx has no attribute "logg" (did you mean .log?)`
	if d := c.edit("lib.star", strings.Replace(lib, "ctx.log", "ctx.logg", 1)); len(d) != 1 || d[0].Message != want || d[0].Range.Start.Line != 1 {
		t.Errorf("diagnostics %+v, want %q at line 1", d, want)
	}
}

// TestLspCountsColumnsInUTF16: positions, both ways, count
// characters as LSP does by default, in UTF-16 units, whatever comes before
// them on the line.
func TestLspCountsColumnsInUTF16(t *testing.T) {
	t.Parallel()
	text := strings.Replace(lspPlug, "    h = ctx.host\n", "    h = \"é😀\" + ctx.host\n    x = \"é😀\" + ctx.inptus\n", 1)
	c := startLSP(t, map[string]string{"deploy.star": text})
	d := c.open("deploy.star")
	prefix := `    x = "é😀" + ctx.`
	if want := len(utf16.Encode([]rune(prefix))); len(d) != 1 || int(d[0].Range.Start.Character) != want || int(d[0].Range.End.Character) != want+len("inptus") {
		t.Errorf("diagnostics %+v, want one from character %d", d, want)
	}
	if got := c.hover("deploy.star", text, `"é😀" + ctx.hos`); !strings.Contains(got, "the host where the agent runs") {
		t.Errorf("hover after non-ASCII text: %q", got)
	}
}

// TestLspFormatsAsFmtDoes: textDocument/formatting gives the text that
// blaise-agent fmt writes, as one edit of the whole document (to its end,
// counted in UTF-16 units), none for a document formatted already, and
// fmt's error, with its place, for one that does not parse.
func TestLspFormatsAsFmtDoes(t *testing.T) {
	t.Parallel()
	messy := "plug(name='acme/fmt')\ndef on_message(ctx,message,next):\n    return next( message )\n# fin: é😀"
	c := startLSP(t, map[string]string{"p.star": messy})
	c.open("p.star")
	format := func() ([]protocol.TextEdit, error) {
		var edits []protocol.TextEdit
		_, err := c.conn.Call(c.ctx, protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{TextDocument: protocol.TextDocumentIdentifier{URI: c.uri("p.star")}}, &edits)
		return edits, err
	}
	edits, err := format()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self(t), "fmt", "p.star")
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fmt: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(c.dir, "p.star"))
	if err != nil {
		t.Fatal(err)
	}
	end := protocol.Position{Line: 3, Character: uint32(len(utf16.Encode([]rune("# fin: é😀"))))}
	if len(edits) != 1 || edits[0].Range != (protocol.Range{End: end}) || edits[0].NewText != string(want) {
		t.Fatalf("edits %+v, want one of the whole text (to %+v) with fmt's\n%s", edits, end, want)
	}
	c.edit("p.star", string(want))
	if edits, err := format(); err != nil || len(edits) != 0 {
		t.Errorf("a formatted document: %+v, %v; want no edit", edits, err)
	}
	c.edit("p.star", "def on_message(ctx, message, next)\n    return next(message)\n")
	if _, err := format(); err == nil || !strings.Contains(err.Error(), "p.star:2:1: got newline, want ':'") {
		t.Errorf("a document that does not parse: %v, want fmt's error with its place", err)
	}
}

// TestLspHoverOnAUseWhileItsPlugIsBroken: hover over a use()'s reference
// shows the plug's inputs from its plug(...) call while the plug, open in
// the editor, does not load (a handler half-written), as completion does.
func TestLspHoverOnAUseWhileItsPlugIsBroken(t *testing.T) {
	t.Parallel()
	c := startLSP(t, map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig})
	c.open("deploy.star")
	c.open("blaise.star")
	c.edit("deploy.star", strings.Replace(lspPlug, "    info = next()\n", "    info = next(\n", 1))
	if got := c.hover("blaise.star", lspConfig, `"./depl`); !strings.Contains(got, "acme/deploy") || !strings.Contains(got, "the repository to clone") {
		t.Errorf("hover over the use of a plug that does not load: %q", got)
	}
}

// check runs `blaise-agent check` on files written to a directory of
// their own: the server's directory keeps the files as they were, so the
// server sees the edits only as the editor sends them.
func (c *lspClient) check(files map[string]string) (string, error) {
	dir := c.t.TempDir()
	for name, text := range files {
		writeFile(c.t, filepath.Join(dir, name), text)
	}
	cmd := exec.Command(self(c.t), "check")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLspGoesToDefinitionThroughLoadAndUse: definition on a name
// load() binds, on load()'s module and on use()'s reference.
func TestLspGoesToDefinitionThroughLoadAndUse(t *testing.T) {
	t.Parallel()
	lib := "# helpers\n\ndef greet(name):\n    return \"hi \" + name\n"
	plug := "load(\"../lib/common.star\", \"greet\")\n\nplug(name = \"greeter\")\n\ndef on_session(ctx, next):\n    ctx.log.info(greet(\"x\"))\n    next()\n"
	config := "agent(command = \"demo\")\nsetup(use(\"./plugs/greeter.star\"))\n"
	c := startLSP(t, map[string]string{"lib/common.star": lib, "plugs/greeter.star": plug, "blaise.star": config})
	c.open("plugs/greeter.star")
	c.open("blaise.star")
	for _, tc := range []struct {
		name, text, mark, file string
		line, col              uint32
	}{
		{"plugs/greeter.star", plug, "info(gre", "lib/common.star", 2, 4},
		{"plugs/greeter.star", plug, ", \"gre", "lib/common.star", 2, 4},
		{"plugs/greeter.star", plug, "../lib/com", "lib/common.star", 0, 0},
		{"blaise.star", config, "./plugs/gr", "plugs/greeter.star", 2, 0},
	} {
		locs := c.definition(tc.name, tc.text, tc.mark)
		if len(locs) != 1 || locs[0].URI != c.uri(tc.file) || locs[0].Range.Start.Line != tc.line || locs[0].Range.Start.Character != tc.col {
			t.Errorf("definition at %q: %+v, want %s:%d:%d", tc.mark, locs, tc.file, tc.line, tc.col)
		}
	}
}

func keys(m map[string]protocol.CompletionItem) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// BenchmarkLspDiagnostics500Lines measures the time from an edit of
// a 500-line plug to its diagnostics, through the real process (docs/editors.md
// reports it; the target is under 50 ms).
func BenchmarkLspDiagnostics500Lines(b *testing.B) {
	var src strings.Builder
	src.WriteString(lspPlug)
	for i := 0; strings.Count(src.String(), "\n") < 500; i++ {
		fmt.Fprintf(&src, `
def step_%d(ctx, files):
    """Compresses the files of step %d."""
    out = []
    for f in files:
        r = ctx.host.exec(["gzip", "-k", f], check = True)
        if ctx.signal.aborted:
            fail("stopping: %%s" %% ctx.signal.reason)
        out.append(r.stdout.strip() + ctx.inputs.repo)
    ctx.log.info("step %d", count = len(out))
    return out
`, i, i, i)
	}
	text := src.String()
	c := startLSP(b, map[string]string{"deploy.star": text})
	c.open("deploy.star")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate between a mistake and its fix, as typing does.
		edit := text
		if i%2 == 0 {
			edit = strings.Replace(text, "ctx.signal.reason", "ctx.signal.raeson", 1)
		}
		if d := c.edit("deploy.star", edit); len(d) != i%2^1 {
			b.Fatalf("edit %d: diagnostics %+v", i, d)
		}
	}
}

// TestLspBadStreamFailsClearly: a stream that is not LSP ends the
// server with status 1 and what was wrong on stderr; a closed stdin ends it
// quietly.
func TestLspBadStreamFailsClearly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, stderr string }{
		{"garbage\r\n\r\n", `blaise-agent: lsp: invalid header line "garbage"`},
		{"", ""},
	} {
		cmd := exec.Command(self(t), "lsp")
		cmd.Stdin = strings.NewReader(tc.in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if got := strings.TrimSpace(stderr.String()); got != tc.stderr || (err == nil) != (tc.stderr == "") {
			t.Errorf("stdin %q: %v, stderr %q; want stderr %q", tc.in, err, got, tc.stderr)
		}
	}
}

// TestLspDiagnosesEveryMistakeAndTheCallsOfNext: the diagnostics of a plug
// hold every mistake check finds in it, each at its own line, the calls of
// next() that are certainly wrong among them; the configuration beside it
// shows each at its use(), and its own input mistake at the value.
func TestLspDiagnosesEveryMistakeAndTheCallsOfNext(t *testing.T) {
	t.Parallel()
	plug := `plug(name = "acme/p", inputs = schema.object(repo = schema.string()))

def on_sesion(ctx, next):
    next()

def on_teardown(ctx, next):
    if ctx.inputs.repo:
        return
    next()
    next()
`
	config := "agent(command = \"demo\")\nsetup(use(\"./p.star\", inputs = {\"repo\": 1}))\n"
	c := startLSP(t, map[string]string{"p.star": plug, "blaise.star": config})
	out, err := c.check(map[string]string{"p.star": plug, "blaise.star": config})
	if err == nil {
		t.Fatalf("check passes: %s", out)
	}
	type diag struct {
		line, char uint32
		msg        string
	}
	var want []diag
	for _, m := range regexp.MustCompile(`(?m)^blaise-agent: blaise\.star:2:(\d+): (?:use "\./p\.star": p\.star:(\d+):(\d+): )?(.*)$`).FindAllStringSubmatch(out, -1) {
		if m[2] != "" {
			line, _ := strconv.Atoi(m[2])
			col, _ := strconv.Atoi(m[3])
			want = append(want, diag{uint32(line - 1), uint32(col - 1), m[4]})
		}
	}
	if len(want) != 3 {
		t.Fatalf("check says:\n%s\nwant 3 mistakes of p.star", out)
	}
	var got []diag
	for _, d := range c.open("p.star") {
		got = append(got, diag{d.Range.Start.Line, d.Range.Start.Character, d.Message})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("diagnostics of p.star:\n%v\nwant (as check):\n%v", got, want)
	}
	d := c.open("blaise.star")
	if len(d) != 4 || d[3].Range.Start.Character != uint32(strings.Index(config[24:], "1}")) || d[3].Message != "plug acme/p: inputs.repo: want string, got int" {
		t.Errorf("diagnostics of blaise.star: %+v", d)
	}
}

// TestLspCompletesInputsInABufferThatDoesNotParse: the schema of the
// inputs comes from the buffer's own plug(...) when the buffer does not
// parse (as at the moment a dot is typed), even in a plug that never
// loaded; hover over ctx.inputs.NAME gives its type and description.
func TestLspCompletesInputsInABufferThatDoesNotParse(t *testing.T) {
	t.Parallel()
	broken := strings.Replace(lspPlug, "    h = ctx.host\n", "    r = ctx.inputs.\n    h = ctx.inputs.repo\n", 1)
	c := startLSP(t, map[string]string{"deploy.star": broken})
	d := c.open("deploy.star")
	if len(d) != 1 || d[0].Message != "expected a field name after '.'" || d[0].Range.Start.Line != 10 {
		t.Errorf("diagnostics %+v, want one at the dangling dot", d)
	}
	items := c.complete("deploy.star", broken, "r = ctx.inputs.")
	if docOf(items["repo"]) != "the repository to clone" || items["git"].Label == "" {
		t.Errorf("completions %v, want repo and git with their docs", keys(items))
	}
	if got := c.hover("deploy.star", broken, "h = ctx.inputs.re"); !strings.Contains(got, "repo: string") || !strings.Contains(got, "the repository to clone") {
		t.Errorf("hover over ctx.inputs.repo: %q", got)
	}
	// An input added to the schema while the buffer does not parse.
	added := strings.Replace(broken, "repo = schema.string(", "tag = schema.int(doc = \"the tag\"),\n        repo = schema.string(", 1)
	c.edit("deploy.star", added)
	if items := c.complete("deploy.star", added, "r = ctx.inputs."); docOf(items["tag"]) != "the tag" {
		t.Errorf("completions after an input was added: %v", keys(items))
	}
}

// TestLspCompletesInputNamesInUse: inside use(REF, inputs = {, the names
// of the plug's inputs, at the top and in a nested object, while the
// configuration does not parse.
func TestLspCompletesInputNamesInUse(t *testing.T) {
	t.Parallel()
	c := startLSP(t, map[string]string{"deploy.star": lspPlug, "blaise.star": lspConfig})
	c.open("blaise.star")
	for _, tc := range []struct{ text, mark, want, doc, not string }{
		{"agent(command = \"demo\")\nsetup(use(\"./deploy.star\", id = \"d\", inputs = {", "inputs = {", "repo", "the repository to clone", ""},
		{"agent(command = \"demo\")\nsetup(use(\"./deploy.star\", id = \"d\", inputs = {\"repo\": \"x\",\n    \"g", "\"g", "git", "", "repo"},
		{"agent(command = \"demo\")\nsetup(use(\"./deploy.star\", id = \"d\", inputs = {\"git\": {\"b", "{\"b", "branch", "the branch to check out", ""},
	} {
		c.edit("blaise.star", tc.text)
		items := c.complete("blaise.star", tc.text, tc.mark)
		if _, ok := items[tc.want]; !ok {
			t.Errorf("%q: completions %v, want %s", tc.text, keys(items), tc.want)
		}
		if tc.doc != "" && docOf(items[tc.want]) != tc.doc {
			t.Errorf("%q: %s has doc %q", tc.text, tc.want, docOf(items[tc.want]))
		}
		if _, ok := items[tc.not]; tc.not != "" && ok {
			t.Errorf("%q: %s offered", tc.text, tc.not)
		}
	}
	// Not in the value of an input.
	text := "agent(command = \"demo\")\nsetup(use(\"./deploy.star\", id = \"d\", inputs = {\"repo\": "
	c.edit("blaise.star", text)
	if items := c.complete("blaise.star", text, "\"repo\": "); items["git"].Label != "" {
		t.Errorf("input names offered for a value: %v", keys(items))
	}
}

// TestLspFlagsATypoThroughAVariableOfTheSchema: a field of the persisted
// value or the inputs read through a variable is checked as the run would
// check it, through an optional object too, also in a plug opened with a
// mistake that stops it loading (here a misspelled handler), whose schemas
// are known all the same.
func TestLspFlagsATypoThroughAVariableOfTheSchema(t *testing.T) {
	t.Parallel()
	text := strings.Replace(lspPlug, "    h = ctx.host\n", "    h = ctx.host\n    st = ctx.persisted.value\n    x = st.vmm\n    i = ctx.inputs\n    g = i.git\n    y = g.brnch\n", 1)
	text = strings.Replace(text, "def on_teardown(", "def on_tear_down(", 1)
	// An optional object is None or a record with its fields.
	text = strings.Replace(text, `git = schema.object(branch = schema.string(default = "main", doc = "the branch to check out")),`, `git = schema.optional(schema.object(branch = schema.string(default = "main", doc = "the branch to check out"))),`, 1)
	c := startLSP(t, map[string]string{"deploy.star": text})
	d := c.open("deploy.star")
	var got []string
	for _, x := range d {
		got = append(got, fmt.Sprintf("%d: %s", x.Range.Start.Line, x.Message))
	}
	want := []string{
		`20: plug acme/deploy: on_tear_down is not a handler name (did you mean on_teardown?)`,
		`12: persisted has no field "vmm" (did you mean "vm"?)`,
		`15: inputs.git has no field "brnch" (did you mean "branch"?)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
