package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	sdk "github.com/coder/acp-go-sdk"
)

// maxAsks is how many answers a permission prompt reads before it gives up
// on a person who does not answer with one of the choices.
const maxAsks = 3

// errPromptCancelled reports a prompt ended by CancelPrompts.
var errPromptCancelled = errors.New("prompt cancelled")

// A menu is the options of a permission request as a person chooses them.
type menu struct {
	opts          []sdk.PermissionOption
	allow, reject int  // the options y and n choose (pick); -1 if none
	yesNo         bool // just one allow and one reject option: ask y/n
}

func newMenu(opts []sdk.PermissionOption) menu {
	m := menu{opts: opts, allow: pick(opts, "allow_"), reject: pick(opts, "reject_")}
	m.yesNo = len(opts) == 2 && m.allow >= 0 && m.reject >= 0
	return m
}

// pick returns the option that a "yes" (prefix "allow_") or a "no"
// ("reject_") chooses without naming one: the first *_once option, else
// the first option of the prefix (allow_always), else -1. A person's one
// answer never becomes a standing grant, whatever order the agent lists
// its options in (Claude Code lists allow_always first). --yes, --no,
// y and n at the prompt, and the answers of `blaise-agent test` all
// choose here.
func pick(opts []sdk.PermissionOption, prefix string) int {
	first := -1
	for i, o := range opts {
		switch kind := string(o.Kind); {
		case kind == prefix+"once":
			return i
		case first < 0 && strings.HasPrefix(kind, prefix):
			first = i
		}
	}
	return first
}

// lines returns the lines that show the options.
func (m menu) lines() []string {
	var ls []string
	for i, o := range m.opts {
		name := o.Name
		if name == "" {
			name = string(o.OptionId)
		}
		ls = append(ls, "  ["+m.key(i)+"] "+name)
	}
	return ls
}

// question returns the question to ask; "" when there is no option.
func (m menu) question() string {
	switch {
	case len(m.opts) == 0:
		return ""
	case m.yesNo:
		return "allow? [y/n] "
	}
	return "choose [1-" + strconv.Itoa(len(m.opts)) + "]: "
}

// key returns the answer that selects option i.
func (m menu) key(i int) string {
	if m.yesNo {
		if i == m.allow {
			return "y"
		}
		return "n"
	}
	return strconv.Itoa(i + 1)
}

// choose returns the option an answer selects, or -1: y/yes and n/no
// select the first allow and reject option, and, unless the menu is y/n, a
// number selects that option.
func (m menu) choose(answer string) int {
	switch a := strings.ToLower(strings.TrimSpace(answer)); a {
	case "y", "yes":
		return m.allow
	case "n", "no":
		return m.reject
	default:
		if n, err := strconv.Atoi(a); err == nil && !m.yesNo && n >= 1 && n <= len(m.opts) {
			return n - 1
		}
	}
	return -1
}

// permission answers session/request_permission: it shows the tool call and
// the options, then answers with Default, or asks the person. The outcome
// is cancelled when no one answers: Ask is nil, fails (EOF) or gets no valid
// answer, ctx ends, or CancelPrompts is called.
func (t *Terminal) permission(ctx context.Context, params json.RawMessage) (any, error) {
	var req sdk.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, invalidParams(err)
	}
	m := newMenu(req.Options)
	title := string(req.ToolCall.ToolCallId)
	if req.ToolCall.Title != nil && *req.ToolCall.Title != "" {
		title = *req.ToolCall.Title
	}

	stop := t.prompts.stopChan()
	s := t.lock()
	s.endLine()
	s.line(s.paint(styleYellow, "permission requested:") + " " + s.paint(styleBold, title))
	for _, l := range m.lines() {
		s.line(l)
	}
	q := m.question()
	var auto string // why the request is answered without asking
	choice := -1
	switch {
	case len(m.opts) == 0:
		auto = "no options"
	case t.Default == "allow" || t.Default == "deny":
		auto = "default"
		choice = m.allow
		if t.Default == "deny" {
			choice = m.reject
		}
		if choice < 0 {
			auto = "no " + t.Default + " option"
		}
	case t.Ask == nil:
		auto = "no one to ask"
	}
	if auto != "" {
		if choice >= 0 {
			s.line(q + m.key(choice) + " (" + auto + ")")
		} else {
			s.line(q + "cancelled (" + auto + ")")
		}
	}
	t.mu.Unlock()

	if auto == "" {
		choice = t.askChoice(ctx, stop, m)
	}
	if choice < 0 {
		return permissionCancelled(), nil
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{
		Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: m.opts[choice].OptionId},
	}}, nil
}

func permissionCancelled() sdk.RequestPermissionResponse {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{
		Cancelled: &sdk.RequestPermissionOutcomeCancelled{},
	}}
}

// askChoice asks the person until they choose an option, and returns it,
// or -1 when they do not.
func (t *Terminal) askChoice(ctx context.Context, stop <-chan struct{}, m menu) int {
	for range maxAsks {
		answer, err := t.prompts.ask(ctx, stop, t.Ask, m.question())
		if err != nil {
			// Ask left the cursor after the question.
			t.lock().line("cancelled")
			t.mu.Unlock()
			return -1
		}
		if i := m.choose(answer); i >= 0 {
			return i
		}
		hint := "  answer y or n"
		if !m.yesNo {
			hint = "  answer a number from 1 to " + strconv.Itoa(len(m.opts))
		}
		t.lock().line(hint)
		t.mu.Unlock()
	}
	return -1
}

// CancelPrompts answers every permission request waiting for the person
// with the outcome cancelled, as ACP requires of a client after it sends
// session/cancel. An Ask running is told to give up.
func (t *Terminal) CancelPrompts() {
	t.prompts.cancel()
}

// prompts are the permission requests waiting for the person: they ask one
// at a time, and are cancelled together.
type prompts struct {
	mu     sync.Mutex
	stop   chan struct{} // closed by cancel; nil until needed
	askSem chan struct{} // held while Ask runs; nil until needed
}

// ask asks question with person (the Terminal's Ask), one prompt at a
// time, until ctx ends or stop is closed: then person gives up without
// taking the person's next line, which is theirs for what comes next.
func (p *prompts) ask(ctx context.Context, stop <-chan struct{}, person func(context.Context, string) (string, error), question string) (string, error) {
	p.mu.Lock()
	if p.askSem == nil {
		p.askSem = make(chan struct{}, 1)
	}
	sem := p.askSem
	p.mu.Unlock()

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Ends with actx, cancelled on return.
	go func() {
		select {
		case <-stop:
			cancel(errPromptCancelled)
		case <-actx.Done():
		}
	}()
	select {
	case sem <- struct{}{}:
	case <-actx.Done():
		return "", context.Cause(actx)
	}
	defer func() { <-sem }()
	text, err := person(actx, question)
	if err != nil && actx.Err() != nil {
		return "", context.Cause(actx)
	}
	return text, err
}

// cancel closes the channel the prompts waiting watch.
func (p *prompts) cancel() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
}

// stopChan returns the channel cancel closes next.
func (p *prompts) stopChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	return p.stop
}

// invalidParams returns the -32602 error for params that do not decode.
func invalidParams(err error) *RPCError {
	return &RPCError{Code: acp.InvalidParams, Message: "Invalid params", Data: jsonObject("error", acp.DescribeJSONError(err).Error())}
}

// jsonObject returns a JSON object of string members, given as key, value
// pairs.
func jsonObject(kv ...string) json.RawMessage {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := encode(m)
	return b
}
