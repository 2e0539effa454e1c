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

	"github.com/blaiseagent/blaise-agent/acp"
	"github.com/blaiseagent/blaise-agent/client"
)

// A Log renders transcript records (acp.Record, one JSON line each) through
// a [client.Terminal], the renderer of `run`: prompts as the history of a
// resumed session shows them, the agent's updates as they streamed, and
// lines of their own for the start of each run, requests the agent made of
// the client, permission decisions and answers plugs gave.
type Log struct {
	Term *client.Terminal
	// Err receives a line for each record that cannot be read.
	Err io.Writer

	line int
	// requests maps the direction and id of each request to its method, so
	// that a response, which names neither, can be told apart.
	requests map[string]string
}

// Record renders one line of a transcript.
func (l *Log) Record(line []byte) {
	l.line++
	var r acp.Record
	if err := json.Unmarshal(line, &r); err != nil {
		fmt.Fprintf(l.Err, "transcript line %d: not a record: %v\n", l.line, err)
		return
	}
	if r.Seq == 1 {
		l.Term.Notice("── run started " + r.Time.UTC().Format(time.DateTime) + " UTC ──")
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
			l.Term.Notice("· the client cancelled the turn")
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
			l.Term.Notice(msg)
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
			l.Term.Notice("· a prompt that cannot be read: " + err.Error())
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
		l.Term.Notice("· " + method)
	}
}

// agentRequest renders a request of the agent to the client.
func (l *Log) agentRequest(method string, params json.RawMessage) {
	switch method {
	case sdk.ClientMethodSessionRequestPermission:
		var p sdk.RequestPermissionRequest
		if err := json.Unmarshal(params, &p); err != nil {
			l.Term.Notice("· a permission request that cannot be read: " + err.Error())
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
		l.Term.Notice("? permission asked: " + title + " [" + strings.Join(opts, ", ") + "]")
	case sdk.ClientMethodFsReadTextFile:
		var p sdk.ReadTextFileRequest
		json.Unmarshal(params, &p)
		l.Term.Notice("· the agent reads " + p.Path)
	case sdk.ClientMethodFsWriteTextFile:
		var p sdk.WriteTextFileRequest
		json.Unmarshal(params, &p)
		l.Term.Notice("· the agent writes " + p.Path)
	default:
		l.Term.Notice("· the agent asks " + method)
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
		l.Term.Notice("→ permission: " + choice + who)
		return
	}
	if plug != "" {
		l.Term.Notice("· " + orRequest(method) + " answered" + by(plug))
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
			l.Term.Notice("· the turn was answered" + by(plug))
		}
		return
	}
	if plug != "" {
		l.Term.Notice("· " + orRequest(method) + " answered" + by(plug))
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
