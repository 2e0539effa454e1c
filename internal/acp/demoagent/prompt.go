package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The prompt language (documented in docs/demo-agent.md).
//
// The prompt's content blocks are handled in order. A text block is read line
// by line; blank lines are skipped. A line whose first word is one of the
// commands below is that command (its argument is the rest of the line,
// trimmed); any other line is echoed as an agent_message_chunk
// "echo: <line>". Other blocks (image, audio, resource, resource_link) are
// described in one agent_message_chunk each. A prompt that produced no update
// at all gets one chunk "echo: ".

const (
	// dialTimeout bounds /dial, for a network that drops packets.
	dialTimeout = 10 * time.Second
	// MaxBig is the largest /big size, in bytes (100 MiB).
	MaxBig = 100 << 20
	// MaxChunks is the largest /chunks count.
	MaxChunks = 1_000_000
	// terminalOutputLimit is outputByteLimit of /terminal's terminal/create.
	terminalOutputLimit = 1 << 20
	// bigAlphabet is the repeating pattern of /big: byte i is bigAlphabet[i%36].
	bigAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

type command struct {
	name  string
	usage string
	help  string
	run   func(t *turn, arg string) error
}

// commands lists the prompt language; filled in init (the /help command
// refers to the table).
var commands []command

var commandByName map[string]*command

func init() {
	commands = []command{
		{"/help", "/help", "list the commands", (*turn).cmdHelp},
		{"/say", "/say TEXT", "agent_message_chunk TEXT (\\n, \\t and \\\\ stand for newline, tab and backslash)", (*turn).cmdSay},
		{"/think", "/think TEXT", "agent_thought_chunk TEXT", (*turn).cmdThink},
		{"/plan", "/plan A; B; C", "plan update, one pending entry per ';'-separated item", (*turn).cmdPlan},
		{"/tool", "/tool NAME", "tool_call NAME (pending), then tool_call_update (completed)", (*turn).cmdTool},
		{"/permission", "/permission [TITLE]", "session/request_permission (allow_once, reject_once); reports \"permission: <optionId|cancelled>\"", (*turn).cmdPermission},
		{"/ask", "/ask KIND TARGET", "session/request_permission for a tool of KIND (read, edit, execute …) on TARGET: a command for execute, else paths; reports \"permission: <optionId|cancelled>\"", (*turn).cmdAsk},
		{"/use", "/use KIND TARGET", "a tool call as Claude Code makes one: tool_call (KIND, TARGET as for /ask), then session/request_permission naming only its toolCallId, title and rawInput, with Claude Code's options; then tool_call_update completed or failed; reports \"permission: <optionId|cancelled>\"", (*turn).cmdUse},
		{"/read", "/read PATH", "fs/read_text_file; reports \"read PATH: <content>\"", (*turn).cmdRead},
		{"/write", "/write PATH TEXT", "fs/write_text_file; reports \"write PATH: ok\"", (*turn).cmdWrite},
		{"/terminal", "/terminal CMD [ARG...]", "terminal/create, wait_for_exit, output, release; reports \"terminal CMD...: exit N\" and the output", (*turn).cmdTerminal},
		{"/big", "/big N[k|m]", "one agent_message_chunk of exactly N bytes (max 100m)", (*turn).cmdBig},
		{"/chunks", "/chunks N", "N agent_message_chunks \"chunk 1\" .. \"chunk N\"", (*turn).cmdChunks},
		{"/slow", "/slow MS", "wait MS milliseconds before each following update of the turn", (*turn).cmdSlow},
		{"/sleep", "/sleep MS", "wait MS milliseconds", (*turn).cmdSleep},
		{"/fail", "/fail [MESSAGE]", "answer the prompt with a JSON-RPC internal error (-32603)", (*turn).cmdFail},
		{"/exit", "/exit [CODE]", "stop the agent at once, without answering (the process exits with CODE)", (*turn).cmdExit},
		{"/create", "/create PATH TEXT", "writes the file itself, not through the client; reports \"create PATH: ok\"", (*turn).cmdCreate},
		{"/dial", "/dial HOST:PORT", "opens a TCP connection itself and closes it; reports \"dial HOST:PORT: ok\"", (*turn).cmdDial},
		{"/env", "/env NAME", "reports \"NAME=value\" or \"NAME unset\"", (*turn).cmdEnv},
		{"/cwd", "/cwd", "reports the session's cwd and the process's working directory", (*turn).cmdCwd},
		{"/ext", "/ext [TEXT]", "extension notification _demo/ping to the client; reports \"ext: sent _demo/ping\"", (*turn).cmdExt},
	}
	commandByName = make(map[string]*command, len(commands))
	for i := range commands {
		commandByName[commands[i].name] = &commands[i]
	}
}

// turn is one session/prompt being processed.
type turn struct {
	updates
	cctx context.Context // for requests to the client; outlives ctx by cancelGrace
	caps acp.ClientCapabilities
}

// updates are the session/updates of a turn: streamed to the client and
// recorded in the session's history.
type updates struct {
	a   *agent
	s   *session
	sid acp.SessionId
	ctx context.Context // cancelled when the turn is cancelled

	delay   time.Duration // set by /slow
	emitted bool          // an update was sent
}

// record appends an update to the session's history.
func (up *updates) record(u acp.SessionUpdate) {
	raw, err := json.Marshal(u)
	if err != nil {
		up.a.log.Error("cannot record update", "err", err)
		return
	}
	up.s.file.History = append(up.s.file.History, raw)
}

// send streams one session/update and records it.
func (up *updates) send(u acp.SessionUpdate) error {
	if up.delay > 0 {
		if err := sleepCtx(up.ctx, up.delay); err != nil {
			return err
		}
	}
	// Not up.ctx: the last updates of a cancelled turn must still go out.
	if err := up.a.conn.SessionUpdate(up.a.runCtx, acp.SessionNotification{SessionId: up.sid, Update: u}); err != nil {
		return err
	}
	up.emitted = true
	up.record(u)
	return nil
}

func (up *updates) message(text string) error {
	return up.send(acp.UpdateAgentMessageText(text))
}

func (t *turn) cancelled() bool { return t.ctx.Err() != nil }

// run processes the prompt and returns the stop reason, or the error that
// answers the prompt (ErrExit for /exit).
func (t *turn) run(blocks []acp.ContentBlock) (acp.StopReason, error) {
	for _, b := range blocks {
		if t.cancelled() {
			return acp.StopReasonCancelled, nil
		}
		var err error
		if b.Text == nil {
			err = t.message(describeBlock(b))
		} else {
			err = t.text(b.Text.Text)
		}
		if err != nil {
			var ee ErrExit
			if errors.As(err, &ee) {
				return "", err
			}
			if t.cancelled() {
				return acp.StopReasonCancelled, nil
			}
			return "", err
		}
	}
	if t.cancelled() {
		return acp.StopReasonCancelled, nil
	}
	if !t.emitted {
		if err := t.message("echo: "); err != nil {
			return "", err
		}
	}
	return acp.StopReasonEndTurn, nil
}

func (t *turn) text(text string) error {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if t.cancelled() {
			return t.ctx.Err()
		}
		name, arg := splitCommand(line)
		if c := commandByName[name]; c != nil {
			if err := c.run(t, arg); err != nil {
				return err
			}
			continue
		}
		if err := t.message("echo: " + line); err != nil {
			return err
		}
	}
	return nil
}

// splitCommand returns the first word of the line and the rest, trimmed.
func splitCommand(line string) (name, arg string) {
	s := strings.TrimSpace(line)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], strings.TrimSpace(s[i+1:])
	}
	return s, ""
}

func describeBlock(b acp.ContentBlock) string {
	switch {
	case b.Image != nil:
		return fmt.Sprintf("image: %s, %d bytes of base64", b.Image.MimeType, len(b.Image.Data))
	case b.Audio != nil:
		return fmt.Sprintf("audio: %s, %d bytes of base64", b.Audio.MimeType, len(b.Audio.Data))
	case b.ResourceLink != nil:
		return fmt.Sprintf("resource_link: %s", b.ResourceLink.Uri)
	case b.Resource != nil:
		r := b.Resource.Resource
		switch {
		case r.TextResourceContents != nil:
			return fmt.Sprintf("resource: %s, %d bytes of text", r.TextResourceContents.Uri, len(r.TextResourceContents.Text))
		case r.BlobResourceContents != nil:
			return fmt.Sprintf("resource: %s, %d bytes of base64", r.BlobResourceContents.Uri, len(r.BlobResourceContents.Blob))
		}
		return "resource: (empty)"
	}
	return "unknown content block"
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// errText renders an error for a report chunk.
func errText(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		if re.Data != nil {
			if b, jerr := json.Marshal(re.Data); jerr == nil {
				return fmt.Sprintf("%s (%d) %s", re.Message, re.Code, b)
			}
		}
		return fmt.Sprintf("%s (%d)", re.Message, re.Code)
	}
	return err.Error()
}

// abs resolves PATH against the session's cwd (ACP paths are absolute).
func (t *turn) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(t.s.file.Cwd, p)
}

func (up *updates) nextToolCallID() acp.ToolCallId {
	n := up.s.file.NextToolCall
	up.s.file.NextToolCall++
	return acp.ToolCallId("call-" + strconv.Itoa(n))
}

func parseMillis(arg string) (time.Duration, error) {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a number of milliseconds, got %q", arg)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseSize reads N, Nk or Nm (KiB, MiB).
func parseSize(arg string) (int, error) {
	s := strings.ToLower(strings.TrimSpace(arg))
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a size N, Nk or Nm, got %q", arg)
	}
	if n > MaxBig/mult {
		return 0, fmt.Errorf("%s exceeds the limit of %d bytes", arg, MaxBig)
	}
	return n * mult, nil
}

// ---- commands ----

func (t *turn) cmdHelp(string) error {
	var b strings.Builder
	b.WriteString("demo agent commands (one per line; other lines are echoed):")
	for _, c := range commands {
		fmt.Fprintf(&b, "\n%s: %s", c.usage, c.help)
	}
	return t.message(b.String())
}

func (t *turn) cmdSay(arg string) error { return t.message(unescape(arg)) }

func (t *turn) cmdThink(arg string) error {
	return t.send(acp.UpdateAgentThoughtText(arg))
}

func (t *turn) cmdPlan(arg string) error {
	entries := []acp.PlanEntry{}
	for _, item := range strings.Split(arg, ";") {
		if item = strings.TrimSpace(item); item != "" {
			entries = append(entries, acp.PlanEntry{Content: item, Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending})
		}
	}
	return t.send(acp.UpdatePlan(entries...))
}

func (t *turn) cmdTool(arg string) error {
	name := arg
	if name == "" {
		name = "demo-tool"
	}
	id := t.nextToolCallID()
	if err := t.send(acp.StartToolCall(id, name,
		acp.WithStartKind(acp.ToolKindOther),
		acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartRawInput(map[string]any{"name": name}),
	)); err != nil {
		return err
	}
	return t.send(acp.UpdateToolCall(id,
		acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(name + ": done"))}),
		acp.WithUpdateRawOutput(map[string]any{"ok": true}),
	))
}

func (t *turn) cmdPermission(arg string) error {
	title := arg
	if title == "" {
		title = "demo permission request"
	}
	return t.askPermission(acp.ToolCallUpdate{Title: acp.Ptr(title), Kind: acp.Ptr(acp.ToolKindOther)},
		acp.PermissionOption{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow_once"},
		acp.PermissionOption{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject once", OptionId: "reject_once"},
	)
}

// askOptions are the options of /ask: one of each kind ACP has.
var askOptions = []acp.PermissionOption{
	{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: "allow_once"},
	{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow always", OptionId: "allow_always"},
	{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject once", OptionId: "reject_once"},
	{Kind: acp.PermissionOptionKindRejectAlways, Name: "Reject always", OptionId: "reject_always"},
}

// cmdAsk asks permission for a tool call as most agents do: the request
// carries the whole tool call.
func (t *turn) cmdAsk(arg string) error {
	call, ok := t.toolCall(arg)
	if !ok {
		return t.message("ask: error: want /ask KIND TARGET")
	}
	return t.askPermission(call, askOptions...)
}

// claudeOptions are the options Claude Code's ACP adapter offers, in its
// order.
var claudeOptions = []acp.PermissionOption{
	{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always Allow", OptionId: "allow_always"},
	{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
	{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
}

// cmdUse makes a tool call as Claude Code does: the tool_call update
// carries the kind and locations; the permission request that follows
// names the call by id, with its title and rawInput only, as ACP allows.
func (t *turn) cmdUse(arg string) error {
	call, ok := t.toolCall(arg)
	if !ok {
		return t.message("use: error: want /use KIND TARGET")
	}
	id := t.nextToolCallID()
	if err := t.send(acp.StartToolCall(id, *call.Title,
		acp.WithStartKind(*call.Kind),
		acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartLocations(call.Locations),
		acp.WithStartRawInput(call.RawInput),
	)); err != nil {
		return err
	}
	result := t.requestPermission(acp.ToolCallUpdate{ToolCallId: id, Title: call.Title, RawInput: call.RawInput}, claudeOptions)
	status := acp.ToolCallStatusFailed
	if result == "allow" || result == "allow_always" {
		status = acp.ToolCallStatusCompleted
	}
	if err := t.send(acp.UpdateToolCall(id, acp.WithUpdateStatus(status))); err != nil {
		return err
	}
	return t.message("permission: " + result)
}

// toolCall is the tool call of /ask and /use KIND TARGET (no id): an
// execute call carries its command in rawInput, the others their paths
// (separated by spaces) in locations and rawInput. A relative path is
// joined to the session's cwd but not cleaned, so that a ".." reaches the
// client as written. False when KIND or TARGET is missing.
func (t *turn) toolCall(arg string) (acp.ToolCallUpdate, bool) {
	kind, target := splitCommand(arg)
	if kind == "" || target == "" {
		return acp.ToolCallUpdate{}, false
	}
	call := acp.ToolCallUpdate{Title: acp.Ptr(kind + " " + target), Kind: acp.Ptr(acp.ToolKind(kind))}
	if acp.ToolKind(kind) == acp.ToolKindExecute {
		call.RawInput = map[string]any{"command": target}
		return call, true
	}
	var paths []string
	for _, path := range strings.Fields(target) {
		if !filepath.IsAbs(path) {
			path = t.s.file.Cwd + "/" + path
		}
		paths = append(paths, path)
		call.Locations = append(call.Locations, acp.ToolCallLocation{Path: path})
	}
	call.RawInput = map[string]any{"paths": paths}
	return call, true
}

// askPermission sends session/request_permission for call (a new tool call
// id, status pending) and reports the outcome.
func (t *turn) askPermission(call acp.ToolCallUpdate, options ...acp.PermissionOption) error {
	call.ToolCallId = t.nextToolCallID()
	call.Status = acp.Ptr(acp.ToolCallStatusPending)
	return t.message("permission: " + t.requestPermission(call, options))
}

// requestPermission sends session/request_permission and returns its
// outcome: the optionId chosen, "cancelled" or "error: …".
func (t *turn) requestPermission(call acp.ToolCallUpdate, options []acp.PermissionOption) string {
	resp, err := t.a.conn.RequestPermission(t.cctx, acp.RequestPermissionRequest{
		SessionId: t.sid,
		ToolCall:  call,
		Options:   options,
	})
	switch {
	case err != nil:
		return "error: " + errText(err)
	case resp.Outcome.Cancelled != nil:
		return "cancelled"
	case resp.Outcome.Selected != nil:
		return string(resp.Outcome.Selected.OptionId)
	}
	return "error: empty outcome"
}

func (t *turn) cmdRead(arg string) error {
	if arg == "" {
		return t.message("read: error: missing PATH")
	}
	path := t.abs(arg)
	if !t.caps.Fs.ReadTextFile {
		return t.message("read " + path + ": error: client did not advertise fs.readTextFile")
	}
	resp, err := t.a.conn.ReadTextFile(t.cctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: path})
	if err != nil {
		return t.message("read " + path + ": error: " + errText(err))
	}
	return t.message("read " + path + ": " + resp.Content)
}

func (t *turn) cmdWrite(arg string) error {
	p, text := splitCommand(arg)
	if p == "" {
		return t.message("write: error: missing PATH")
	}
	text = unescape(text)
	path := t.abs(p)
	if !t.caps.Fs.WriteTextFile {
		return t.message("write " + path + ": error: client did not advertise fs.writeTextFile")
	}
	if _, err := t.a.conn.WriteTextFile(t.cctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: path, Content: text}); err != nil {
		return t.message("write " + path + ": error: " + errText(err))
	}
	return t.message("write " + path + ": ok")
}

// unescape turns \n, \t and \\ into newline, tab and backslash.
var unescape = strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t").Replace

func (t *turn) cmdTerminal(arg string) error {
	fields := strings.Fields(arg)
	if len(fields) == 0 {
		return t.message("terminal: error: missing CMD")
	}
	label := "terminal " + strings.Join(fields, " ")
	if !t.caps.Terminal {
		return t.message(label + ": error: client did not advertise terminal")
	}
	conn := t.a.conn
	cwd := t.s.file.Cwd
	created, err := conn.CreateTerminal(t.cctx, acp.CreateTerminalRequest{
		SessionId:       t.sid,
		Command:         fields[0],
		Args:            fields[1:],
		Cwd:             &cwd,
		OutputByteLimit: acp.Ptr(terminalOutputLimit),
	})
	if err != nil {
		return t.message(label + ": error: create: " + errText(err))
	}
	tid := created.TerminalId
	release := func() {
		if _, err := conn.ReleaseTerminal(t.cctx, acp.ReleaseTerminalRequest{SessionId: t.sid, TerminalId: tid}); err != nil {
			t.a.log.Info("terminal/release failed", "terminal", tid, "err", err)
		}
	}
	exit, err := conn.WaitForTerminalExit(t.ctx, acp.WaitForTerminalExitRequest{SessionId: t.sid, TerminalId: tid})
	if err != nil {
		if t.cancelled() {
			// Cancelled turn: stop the command, free the terminal, report nothing.
			if _, kerr := conn.KillTerminal(t.cctx, acp.KillTerminalRequest{SessionId: t.sid, TerminalId: tid}); kerr != nil {
				t.a.log.Info("terminal/kill failed", "terminal", tid, "err", kerr)
			}
			release()
			return t.ctx.Err()
		}
		release()
		return t.message(label + ": error: wait_for_exit: " + errText(err))
	}
	out, err := conn.TerminalOutput(t.cctx, acp.TerminalOutputRequest{SessionId: t.sid, TerminalId: tid})
	release()
	if err != nil {
		return t.message(label + ": error: output: " + errText(err))
	}
	status := "exit unknown"
	switch {
	case exit.ExitCode != nil:
		status = "exit " + strconv.Itoa(*exit.ExitCode)
	case exit.Signal != nil:
		status = "signal " + *exit.Signal
	}
	text := label + ": " + status + "\n" + out.Output
	if out.Truncated {
		text += "\n[output truncated]"
	}
	return t.message(text)
}

func (t *turn) cmdBig(arg string) error {
	n, err := parseSize(arg)
	if err != nil {
		return t.message("big: error: " + err.Error())
	}
	b := make([]byte, n)
	for i := 0; i < n; i += len(bigAlphabet) {
		copy(b[i:], bigAlphabet)
	}
	return t.message(string(b))
}

func (t *turn) cmdChunks(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 0 || n > MaxChunks {
		return t.message(fmt.Sprintf("chunks: error: want a count from 0 to %d, got %q", MaxChunks, arg))
	}
	for i := 1; i <= n; i++ {
		if t.cancelled() {
			return t.ctx.Err()
		}
		if err := t.message("chunk " + strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

func (t *turn) cmdSlow(arg string) error {
	d, err := parseMillis(arg)
	if err != nil {
		return t.message("slow: error: " + err.Error())
	}
	t.delay = d
	return nil
}

func (t *turn) cmdSleep(arg string) error {
	d, err := parseMillis(arg)
	if err != nil {
		return t.message("sleep: error: " + err.Error())
	}
	return sleepCtx(t.ctx, d)
}

func (t *turn) cmdFail(arg string) error {
	msg := arg
	if msg == "" {
		msg = "demo failure requested by /fail"
	}
	return acp.NewInternalError(map[string]any{"error": msg})
}

func (t *turn) cmdExit(arg string) error {
	code := 0
	if arg != "" {
		n, err := strconv.Atoi(arg)
		if err != nil {
			return t.message("exit: error: want an exit code, got " + strconv.Quote(arg))
		}
		code = n
	}
	return ErrExit{Code: code}
}

// cmdCreate writes a file from the agent's own process, as a coding agent's
// tools do, so tests can see what a sandbox lets it write.
func (t *turn) cmdCreate(arg string) error {
	p, text := splitCommand(arg)
	if p == "" {
		return t.message("create: error: missing PATH")
	}
	path := t.abs(p)
	if err := os.WriteFile(path, []byte(unescape(text)), 0o644); err != nil {
		return t.message("create " + path + ": error: " + err.Error())
	}
	return t.message("create " + path + ": ok")
}

// cmdDial connects from the agent's own process, so tests can see whether
// it reaches the network.
func (t *turn) cmdDial(arg string) error {
	if arg == "" {
		return t.message("dial: error: missing HOST:PORT")
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(t.cctx, dialTimeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", arg)
	if err != nil {
		return t.message("dial " + arg + ": error: " + err.Error())
	}
	c.Close()
	return t.message("dial " + arg + ": ok")
}

func (t *turn) cmdEnv(arg string) error {
	if arg == "" {
		return t.message("env: error: missing NAME")
	}
	if v, ok := os.LookupEnv(arg); ok {
		return t.message(arg + "=" + v)
	}
	return t.message(arg + " unset")
}

func (t *turn) cmdCwd(string) error {
	wd, err := os.Getwd()
	if err != nil {
		wd = "error: " + err.Error()
	}
	return t.message("session cwd: " + t.s.file.Cwd + "\nprocess cwd: " + wd)
}

func (t *turn) cmdExt(arg string) error {
	params := map[string]any{"sessionId": string(t.sid)}
	if arg != "" {
		params["text"] = arg
	}
	if err := t.a.conn.NotifyExtension(t.a.runCtx, "_demo/ping", params); err != nil {
		return t.message("ext: error: " + errText(err))
	}
	return t.message("ext: sent _demo/ping")
}
