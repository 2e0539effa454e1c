package client

import (
	"context"
	"encoding/json"
	"fmt"
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

	mu      sync.Mutex
	stream  streamKind    // the kind of the text stream being written
	started bool          // the stream has written its first line prefix
	midLine bool          // Out's cursor is not at the start of a line
	stop    chan struct{} // closed by CancelPrompts; nil until needed
	askSem  chan struct{} // held while Ask runs; nil until needed
	md      *markdown     // nil until the first message with Markdown
	spin    spinner
}

// A streamKind is a kind of text rendered as a stream of chunks.
type streamKind uint8

const (
	noStream streamKind = iota
	messageStream
	thoughtStream
	userStream
)

// ANSI styles used when Color is set.
const (
	styleReset   = "\x1b[0m"
	styleBold    = "\x1b[1m"
	styleDim     = "\x1b[2m"
	styleThought = "\x1b[2;3m"
	styleRed     = "\x1b[31m"
	styleGreen   = "\x1b[32m"
	styleYellow  = "\x1b[33m"
	styleCyan    = "\x1b[36m"
)

// Capabilities returns the clientCapabilities to send in initialize: text
// files can be read and written, and there are no terminals.
func (t *Terminal) Capabilities() json.RawMessage {
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
	if err := t.update(n.Update); err != nil {
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
		return t.readFile(params)
	case sdk.ClientMethodFsWriteTextFile:
		return t.writeFile(params)
	}
	return nil, ErrMethodNotFound
}

// EndTurn ends the line the turn's last chunk left open, and shows
// stopReason unless it is "" or "end_turn".
func (t *Terminal) EndTurn(stopReason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endLine()
	if stopReason != "" && stopReason != string(sdk.StopReasonEndTurn) {
		t.line(t.paint(styleDim, "· stopped: "+stopReason))
	}
}

// Notice writes msg on a line of its own, among the rendered updates.
func (t *Terminal) Notice(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endLine()
	t.line(t.paint(styleDim, msg))
}

// Log writes line, a line of a log that is not the session's (a plug's, a
// session process's), to Err on a line of its own: the agent's line being
// written is ended first. A spinner showing goes on below it.
func (t *Terminal) Log(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spin.erase(t.Status)
	t.endLine()
	if t.Err != nil {
		io.WriteString(t.Err, strings.TrimSuffix(line, "\n")+"\n")
	}
	t.spin.draw(t.Status, t.paint)
}

// update renders one session update.
func (t *Terminal) update(raw json.RawMessage) error {
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch head.Kind {
	case "agent_message_chunk":
		u, err := decode[sdk.SessionUpdateAgentMessageChunk](raw)
		if err != nil {
			return err
		}
		t.text(messageStream, ContentText(u.Content))
	case "agent_thought_chunk":
		u, err := decode[sdk.SessionUpdateAgentThoughtChunk](raw)
		if err != nil {
			return err
		}
		t.text(thoughtStream, ContentText(u.Content))
	case "user_message_chunk":
		u, err := decode[sdk.SessionUpdateUserMessageChunk](raw)
		if err != nil {
			return err
		}
		t.text(userStream, ContentText(u.Content))
	case "tool_call":
		u, err := decode[sdk.SessionUpdateToolCall](raw)
		if err != nil {
			return err
		}
		t.toolCall(u)
	case "tool_call_update":
		u, err := decode[sdk.SessionToolCallUpdate](raw)
		if err != nil {
			return err
		}
		t.toolCallUpdate(u)
	case "plan":
		u, err := decode[sdk.SessionUpdatePlan](raw)
		if err != nil {
			return err
		}
		t.plan(u.Entries)
	case "current_mode_update":
		u, err := decode[sdk.SessionCurrentModeUpdate](raw)
		if err != nil {
			return err
		}
		t.endLine()
		t.line(t.paint(styleDim, "· mode: "+string(u.CurrentModeId)))
	case "session_info_update":
		u, err := decode[sdk.SessionSessionInfoUpdate](raw)
		if err != nil {
			return err
		}
		if u.Title != nil && *u.Title != "" {
			t.endLine()
			t.line(t.paint(styleDim, "· title: "+*u.Title))
		}
	}
	return nil
}

// decode decodes one session update variant.
func decode[T any](raw json.RawMessage) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	return v, nil
}

func (t *Terminal) toolCall(u *sdk.SessionUpdateToolCall) {
	title := u.Title
	if title == "" {
		title = string(u.ToolCallId)
	}
	s := t.paint(styleCyan, "•") + " " + t.paint(styleBold, title)
	if u.Kind != "" {
		s += " " + t.paint(styleDim, "["+string(u.Kind)+"]")
	}
	if u.Status != "" {
		s += " " + t.status("("+string(u.Status)+")", u.Status)
	}
	t.endLine()
	t.line(s)
	t.toolContent(u.Content)
}

func (t *Terminal) toolCallUpdate(u *sdk.SessionToolCallUpdate) {
	var s string
	switch {
	case u.Title != nil && u.Status != nil:
		s = *u.Title + " " + t.status("("+string(*u.Status)+")", *u.Status)
	case u.Title != nil:
		s = *u.Title
	case u.Status != nil:
		s = t.status(string(*u.Status), *u.Status)
	}
	if s != "" {
		t.endLine()
		t.line("  ↳ " + s)
	}
	t.toolContent(u.Content)
}

// status styles s by a tool call status.
func (t *Terminal) status(s string, st sdk.ToolCallStatus) string {
	switch st {
	case sdk.ToolCallStatusCompleted:
		return t.paint(styleGreen, s)
	case sdk.ToolCallStatusFailed:
		return t.paint(styleRed, s)
	case sdk.ToolCallStatusInProgress:
		return t.paint(styleYellow, s)
	}
	return t.paint(styleDim, s)
}

// toolContent renders a tool call's content, indented by four spaces.
func (t *Terminal) toolContent(content []sdk.ToolCallContent) {
	if len(content) == 0 {
		return
	}
	t.endLine()
	for _, c := range content {
		var s string
		switch {
		case c.Content != nil:
			s = ContentText(c.Content.Content)
		case c.Diff != nil:
			s = "[diff " + c.Diff.Path + "]"
		case c.Terminal != nil:
			s = "[terminal " + c.Terminal.TerminalId + "]"
		}
		for l := range strings.Lines(strings.TrimSuffix(s, "\n")) {
			l = strings.TrimSuffix(l, "\n")
			if l == "" {
				t.line("")
			} else {
				t.line("    " + l)
			}
		}
	}
}

func (t *Terminal) plan(entries []sdk.PlanEntry) {
	t.endLine()
	if len(entries) == 0 {
		t.line(t.paint(styleBold, "plan:") + " (empty)")
		return
	}
	t.line(t.paint(styleBold, "plan:"))
	for i, e := range entries {
		var mark, style string
		switch e.Status {
		case sdk.PlanEntryStatusPending:
			mark, style = "[ ]", ""
		case sdk.PlanEntryStatusInProgress:
			mark, style = "[~]", styleYellow
		case sdk.PlanEntryStatusCompleted:
			mark, style = "[x]", styleGreen
		default:
			mark, style = "[?]", ""
		}
		t.line(fmt.Sprintf("  %d. %s %s", i+1, t.paint(style, mark), e.Content))
	}
}

// ContentText returns the text of a content block, or a short description
// of a block that is not text.
func ContentText(c sdk.ContentBlock) string {
	switch {
	case c.Text != nil:
		return c.Text.Text
	case c.Image != nil:
		return "[image " + c.Image.MimeType + "]"
	case c.Audio != nil:
		return "[audio " + c.Audio.MimeType + "]"
	case c.ResourceLink != nil:
		return "[link " + c.ResourceLink.Uri + "]"
	case c.Resource != nil:
		switch r := c.Resource.Resource; {
		case r.TextResourceContents != nil:
			return "[resource " + r.TextResourceContents.Uri + "]"
		case r.BlobResourceContents != nil:
			return "[resource " + r.BlobResourceContents.Uri + "]"
		}
		return "[resource]"
	}
	return "[content]"
}

// text writes a chunk of a text stream of kind k. A chunk of another kind
// than the stream being written ends that stream's line first. Each line of
// a thought or a user message gets a prefix, written with its first
// character so that a line is never left holding only a prefix.
func (t *Terminal) text(k streamKind, s string) {
	if k != t.stream {
		t.endLine()
		t.stream, t.started = k, false
	}
	if k == messageStream && t.markdown() {
		t.write(t.md.add(s))
		return
	}
	for s != "" {
		l, rest, nl := strings.Cut(s, "\n")
		if l != "" {
			if !t.midLine {
				t.write(t.prefix(k))
			}
			t.write(t.paint(streamStyle(k), l))
			t.midLine = true
		}
		if nl {
			t.write("\n")
			t.midLine = false
		}
		s = rest
	}
}

// streamStyle returns the style of a kind of stream.
func streamStyle(k streamKind) string {
	if k == thoughtStream {
		return styleThought
	}
	return ""
}

// thinking starts a thought; its later lines are indented to match.
const thinking = "thinking: "

// prefix returns the prefix of the next line of a stream of kind k.
func (t *Terminal) prefix(k streamKind) string {
	switch k {
	case thoughtStream:
		if t.started {
			return strings.Repeat(" ", len(thinking))
		}
		t.started = true
		return t.paint(styleThought, thinking)
	case userStream:
		return t.paint(styleCyan, "> ")
	}
	return ""
}

// markdown tells whether messages are rendered as Markdown, making the
// renderer when first needed.
func (t *Terminal) markdown() bool {
	if !t.Markdown {
		return false
	}
	if t.md == nil {
		t.md = newMarkdown(t.Width, t.Color)
	}
	return true
}

// endLine ends the text stream being written, and its line if the cursor is
// not at the start of one.
func (t *Terminal) endLine() {
	if t.md != nil {
		t.write(t.md.flush())
	}
	if t.midLine {
		t.write("\n")
		t.midLine = false
	}
	t.stream = noStream
}

// line writes s and a newline; the cursor must be at the start of a line.
func (t *Terminal) line(s string) {
	t.write(s + "\n")
}

// write writes s to Out, in place of the spinner, which stops: what it
// waited for has come.
func (t *Terminal) write(s string) {
	if s == "" {
		return
	}
	t.spin.stop(t.Status)
	if t.Out != nil {
		io.WriteString(t.Out, s)
	}
}

// paint wraps s in style when Color is set.
func (t *Terminal) paint(style, s string) string {
	if !t.Color || style == "" || s == "" {
		return s
	}
	return style + s + styleReset
}

// diag writes a diagnostic line to Err.
func (t *Terminal) diag(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spin.stop(t.Status)
	if t.Err != nil {
		fmt.Fprintf(t.Err, "client: "+format+"\n", args...)
	}
}
