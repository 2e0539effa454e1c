package client

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// A Terminal renders an ACP session as text for a person and answers the
// agent's requests; it is the [Handler] of `blaise-agent run`.
//
// Session updates are rendered as follows (with Color, styles are added but
// the text is the same):
//
//	agent_message_chunk        the text as it is; chunks run together
//	agent_thought_chunk        thinking: TEXT (dim italic)
//	user_message_chunk         > TEXT (history replayed by session/load)
//	tool_call                  • TITLE [KIND] (STATUS), then its content
//	tool_call_update           ↳ STATUS (or ↳ TITLE (STATUS)), then its content
//	plan                       plan: and numbered entries: [ ] pending, [~] in progress, [x] completed
//	current_mode_update        · mode: ID
//	session_info_update        · title: TITLE (when a title is set)
//
// available_commands_update, config_option_update and usage_update print
// nothing: agents send them on their own at the start of a session or after
// every turn, and a person would read them as noise. Unknown kinds and other
// notifications are ignored. Text content of a tool call is indented by
// four spaces; other content blocks are shown as [image MIME], [audio MIME],
// [link URI], [resource URI], [diff PATH] or [terminal ID].
//
// Chunks of one kind stream on as they come; a block of another kind (a tool
// call, a plan, a thought after a message, …) always starts on a fresh line.
// Call [Terminal.EndTurn] when a prompt is answered to end the last line,
// and write other lines among the updates with [Terminal.Notice] and
// [Terminal.Log]. With Markdown set, the agent's messages are rendered for
// the terminal a block at a time; with Status set, [Terminal.Busy] shows a
// spinner there until the next line is written.
//
// A permission request shows the tool call's title and the options, then
// asks "allow? [y/n] " when the options are one allow_* and one reject_*
// option, or "choose [1-N]: " otherwise (y and n still pick the first
// allow_* and reject_* option). With Default set, the question is printed
// with the answer chosen, "allow? [y/n] y (default)". A request no one
// answers is answered with the outcome cancelled; so are the requests
// waiting when [Terminal.CancelPrompts] is called, as ACP requires after
// session/cancel.
//
// A Terminal is safe for concurrent use. Its exported fields must be set
// before the first message arrives and not changed afterwards.
type Terminal struct {
	Out io.Writer // the rendered session; nil discards it
	Err io.Writer // diagnostics (bad updates, refused file access); nil discards them

	// Ask shows question (which does not end in a newline) to the person and
	// returns the line they answer; white space around the answer is
	// ignored, and an error (io.EOF) means no answer. When ctx ends first,
	// Ask returns without taking a line. Questions are asked one at a time.
	// Nil means there is no one to ask: permission requests are answered by
	// Default, or cancelled.
	Ask func(ctx context.Context, question string) (answer string, err error)

	// Default, when "allow" or "deny", answers every permission request with
	// its first allow_* or reject_* option, without asking (--yes, --no).
	// "" asks the person.
	Default string

	// Root is the session's working directory: the agent may read and write
	// files below it (fs/read_text_file, fs/write_text_file) and nowhere else.
	// "" refuses all file access.
	Root string

	// Color adds ANSI styles to the rendering.
	Color bool

	// Markdown renders agent_message_chunk text as Markdown, wrapped at
	// Width columns (0: 80); else the text is written as it comes.
	Markdown bool
	Width    int

	// Status is the terminal a spinner is drawn on (with carriage returns
	// and erase-line sequences); nil: no spinner.
	Status io.Writer

	mu      sync.Mutex // guards scr
	scr     screen
	prompts prompts
}

// Capabilities returns the clientCapabilities to send in initialize: text
// files below Root can be read and written, and there are no terminals.
// Without a Root (a session on a server's runner, whose files are not this
// machine's), no file access is offered: the agent works with the files
// itself, where it runs, rather than ask for what is refused.
func (t *Terminal) Capabilities() json.RawMessage {
	if t.Root == "" {
		return json.RawMessage(`{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}`)
	}
	return json.RawMessage(`{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":false}`)
}

// Notification renders a session/update; other notifications are ignored.
func (t *Terminal) Notification(method string, params json.RawMessage) {
	if method != sdk.ClientMethodSessionUpdate {
		return
	}
	var n struct {
		Update json.RawMessage `json:"update"`
	}
	if err := json.Unmarshal(params, &n); err != nil || n.Update == nil {
		t.diag("malformed session/update: %s", params)
		return
	}
	s := t.lock()
	err := renderer{s}.update(n.Update)
	t.mu.Unlock()
	if err != nil {
		t.diag("malformed session/update: %v", err)
	}
}

// Request answers session/request_permission, fs/read_text_file and
// fs/write_text_file; other methods get [ErrMethodNotFound].
func (t *Terminal) Request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case sdk.ClientMethodSessionRequestPermission:
		return t.permission(ctx, params)
	case sdk.ClientMethodFsReadTextFile:
		return t.files().readFile(params)
	case sdk.ClientMethodFsWriteTextFile:
		return t.files().writeFile(params)
	}
	return nil, ErrMethodNotFound
}

// EndTurn ends the line the turn's last chunk left open, and shows
// stopReason unless it is "" or "end_turn".
func (t *Terminal) EndTurn(stopReason string) {
	s := t.lock()
	defer t.mu.Unlock()
	s.endLine()
	if stopReason != "" && stopReason != string(sdk.StopReasonEndTurn) {
		s.line(s.paint(styleDim, "· stopped: "+stopReason))
	}
}

// Notice writes msg on a line of its own, among the rendered updates.
func (t *Terminal) Notice(msg string) {
	s := t.lock()
	defer t.mu.Unlock()
	s.endLine()
	s.line(s.paint(styleDim, msg))
}

// Log writes line, a line of a log that is not the session's (a plug's, a
// session process's), to Err on a line of its own: the agent's line being
// written is ended first. A spinner showing goes on below it.
func (t *Terminal) Log(line string) {
	s := t.lock()
	defer t.mu.Unlock()
	s.spin.erase(s.status)
	s.endLine()
	if s.err != nil {
		io.WriteString(s.err, strings.TrimSuffix(line, "\n")+"\n")
	}
	s.spin.draw(s.status, s.paint)
}

// lock locks t and returns its screen, set up from the exported fields.
func (t *Terminal) lock() *screen {
	t.mu.Lock()
	s := &t.scr
	s.out, s.err, s.status = t.Out, t.Err, t.Status
	s.color, s.markdown, s.width = t.Color, t.Markdown, t.Width
	return s
}

// diag writes a diagnostic line to Err.
func (t *Terminal) diag(format string, args ...any) {
	t.lock().diag(format, args...)
	t.mu.Unlock()
}

// files returns the file system access that t grants the agent.
func (t *Terminal) files() fileAccess {
	return fileAccess{root: t.Root, diag: t.diag}
}
