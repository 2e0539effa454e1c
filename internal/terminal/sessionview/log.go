// Package sessionview shows a person what the store keeps of a session:
// its record (`blaise-agent sessions show`) and its transcript rendered as
// `blaise-agent run` renders a session (`blaise-agent sessions log`).
package sessionview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/client"
)

// A Log renders transcript records (acp.Record, one JSON line each) through
// a [client.Terminal], the renderer of `run`: prompts as the history of a
// resumed session shows them, the agent's updates as they streamed, and
// lines of their own for the start of each run, requests the agent made of
// the client, permission decisions and answers plugs gave.
type Log struct {
	Term View
	// Err receives a line for each record that cannot be read.
	Err io.Writer

	line int
	at   time.Time // the time of the record being rendered
	// requests maps the direction and id of each request to its method, so
	// that a response, which names neither, can be told apart.
	requests map[string]string
}

// A View is what a Log renders to: a [client.Terminal], or the
// dashboard's conversation. A View that also has a method Note(Note) gets
// the Log's own lines as notes that say what they are; the others get
// their text as a notice.
type View interface {
	Notification(method string, params json.RawMessage)
	Notice(msg string)
	EndTurn(stopReason string)
}

var _ View = (*client.Terminal)(nil)

// A Note is a line of the Log's own: not the agent's, but about the
// session.
type Note struct {
	Kind NoteKind
	Text string    // as the terminal shows it
	Plug string    // the plug that answered, if one did
	Time time.Time // the record's
	// Title and Options of a permission request; Choice of its answer.
	Title   string
	Options []string
	Choice  string
}

// NoteKind says what a Note is about.
type NoteKind uint8

const (
	NoteInfo       NoteKind = iota
	NoteRun                 // a run started
	NotePermission          // the agent asked permission
	NoteDecision            // a permission request was answered
	NoteError               // a request failed
)

// note sends n to the view.
func (l *Log) note(n Note) {
	n.Time = l.at
	if v, ok := l.Term.(interface{ Note(Note) }); ok {
		v.Note(n)
		return
	}
	l.Term.Notice(n.Text)
}

// Record renders one line of a transcript.
func (l *Log) Record(line []byte) {
	l.line++
	var r acp.Record
	if err := json.Unmarshal(line, &r); err != nil {
		fmt.Fprintf(l.Err, "transcript line %d: not a record: %v\n", l.line, err)
		return
	}
	l.at = r.Time
	if r.Seq == 1 {
		l.note(Note{Kind: NoteRun, Text: "── run started " + r.Time.UTC().Format(time.DateTime) + " UTC ──"})
	}
	var m struct {
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Message, &m); err != nil {
		fmt.Fprintf(l.Err, "transcript line %d: message: %v\n", l.line, err)
		return
	}
	toAgent := r.Direction == acp.ToAgent.Direction()
	switch r.Kind {
	case acp.Request.String():
		l.remember(r.Direction, r.ID, r.Method)
		if toAgent {
			l.clientRequest(r.Method, m.Params)
		} else {
			l.agentRequest(r.Method, m.Params)
		}
	case acp.Notification.String():
		switch {
		case !toAgent:
			l.Term.Notification(r.Method, m.Params)
		case r.Method == sdk.AgentMethodSessionCancel:
			l.note(Note{Text: "· the client cancelled the turn"})
		}
	case acp.Response.String():
		// A response travels against its request.
		reqDir := acp.ToAgent.Direction()
		if toAgent {
			reqDir = acp.ToClient.Direction()
		}
		method := l.forget(reqDir, r.ID)
		switch {
		case m.Error != nil:
			l.Term.EndTurn("")
			msg := fmt.Sprintf("· %s failed%s: %s (%d)", orRequest(method), by(r.Plug), m.Error.Message, m.Error.Code)
			if len(m.Error.Data) > 0 {
				msg += ": " + string(m.Error.Data)
			}
			l.note(Note{Kind: NoteError, Text: msg, Plug: r.Plug})
		case toAgent:
			l.decision(method, m.Result, r.Plug)
		default:
			l.answer(method, m.Result, r.Plug)
		}
	}
}

// clientRequest renders a request of the client to the agent.
func (l *Log) clientRequest(method string, params json.RawMessage) {
	switch method {
	case sdk.AgentMethodInitialize:
	case sdk.AgentMethodSessionPrompt:
		var p sdk.PromptRequest
		if err := json.Unmarshal(params, &p); err != nil {
			l.note(Note{Kind: NoteError, Text: "· a prompt that cannot be read: " + err.Error()})
			return
		}
		// The prompt is rendered as the user's message, as the history of
		// a resumed session shows it.
		for _, c := range p.Prompt {
			n, err := json.Marshal(sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateUserMessage(c)})
			if err == nil {
				l.Term.Notification(sdk.ClientMethodSessionUpdate, n)
			}
		}
		l.Term.EndTurn("")
	default:
		l.note(Note{Text: "· " + method})
	}
}

// agentRequest renders a request of the agent to the client.
func (l *Log) agentRequest(method string, params json.RawMessage) {
	switch method {
	case sdk.ClientMethodSessionRequestPermission:
		var p sdk.RequestPermissionRequest
		if err := json.Unmarshal(params, &p); err != nil {
			l.note(Note{Kind: NoteError, Text: "· a permission request that cannot be read: " + err.Error()})
			return
		}
		title := "(untitled)"
		if p.ToolCall.Title != nil {
			title = *p.ToolCall.Title
		}
		opts := make([]string, len(p.Options))
		for i, o := range p.Options {
			opts[i] = string(o.OptionId)
		}
		l.note(Note{Kind: NotePermission, Text: "? permission asked: " + title + " [" + strings.Join(opts, ", ") + "]", Title: title, Options: opts})
	case sdk.ClientMethodFsReadTextFile:
		var p sdk.ReadTextFileRequest
		json.Unmarshal(params, &p)
		l.note(Note{Text: "· the agent reads " + p.Path})
	case sdk.ClientMethodFsWriteTextFile:
		var p sdk.WriteTextFileRequest
		json.Unmarshal(params, &p)
		l.note(Note{Text: "· the agent writes " + p.Path})
	default:
		l.note(Note{Text: "· the agent asks " + method})
	}
}

// decision renders the answer to a request of the agent: a permission
// decision says what was chosen and who chose it.
func (l *Log) decision(method string, result json.RawMessage, plug string) {
	var p sdk.RequestPermissionResponse
	if method == sdk.ClientMethodSessionRequestPermission || (method == "" && json.Unmarshal(result, &p) == nil && (p.Outcome.Selected != nil || p.Outcome.Cancelled != nil)) {
		json.Unmarshal(result, &p)
		choice := "cancelled"
		if p.Outcome.Selected != nil {
			choice = string(p.Outcome.Selected.OptionId)
		}
		who := " (by the client)"
		if plug != "" {
			who = " (by plug " + plug + ")"
		}
		l.note(Note{Kind: NoteDecision, Text: "→ permission: " + choice + who, Plug: plug, Choice: choice})
		return
	}
	if plug != "" {
		l.note(Note{Text: "· " + orRequest(method) + " answered" + by(plug), Plug: plug})
	}
}

// answer renders the agent's answer to a request of the client: the end of
// a turn, or, for a request a plug answered, who did.
func (l *Log) answer(method string, result json.RawMessage, plug string) {
	var p sdk.PromptResponse
	if method == sdk.AgentMethodSessionPrompt || (method == "" && json.Unmarshal(result, &p) == nil && p.StopReason != "") {
		json.Unmarshal(result, &p)
		l.Term.EndTurn(string(p.StopReason))
		if plug != "" {
			l.note(Note{Text: "· the turn was answered" + by(plug), Plug: plug})
		}
		return
	}
	if plug != "" {
		l.note(Note{Text: "· " + orRequest(method) + " answered" + by(plug), Plug: plug})
	}
}

func (l *Log) remember(dir string, id json.RawMessage, method string) {
	if l.requests == nil {
		l.requests = map[string]string{}
	}
	l.requests[dir+" "+string(id)] = method
}

func (l *Log) forget(dir string, id json.RawMessage) string {
	k := dir + " " + string(id)
	m := l.requests[k]
	delete(l.requests, k)
	return m
}

// orRequest names a request by its method, or says it is one whose
// request is not in the transcript (a plug answered it before it left the
// chain).
func orRequest(method string) string {
	if method == "" {
		return "a request"
	}
	return method
}

func by(plug string) string {
	if plug == "" {
		return ""
	}
	return " by plug " + plug
}
