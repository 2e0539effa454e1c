package chain

import (
	"encoding/json"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	sdk "github.com/coder/acp-go-sdk"
)

// opened follows the agent's session that a run works in, where the
// messages leave the chain: the session a session/new or session/fork
// answered with, or the one a session/load or session/resume that the
// agent accepted asked for. The latest goes with the run's pause (L7), so
// that a session can be loaded again even when its front end went before
// it had recorded the session (it records it beside the answer).
type opened struct {
	next acp.Recorder // nil: nothing is recorded

	mu    sync.Mutex
	asked map[string]string // an opening request's id → the session it asks for ("": a new one)
	id    string
}

func newOpened(next acp.Recorder) *opened {
	return &opened{next: next, asked: map[string]string{}}
}

func (o *opened) Record(side acp.Side, m *acp.Message, by string) {
	switch {
	case side == acp.ToAgent && m.Kind == acp.Request:
		switch m.Method {
		case sdk.AgentMethodSessionNew, sdk.AgentMethodSessionFork:
			o.ask(m.ID, "")
		case sdk.AgentMethodSessionLoad, sdk.AgentMethodSessionResume:
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Params, &p) == nil && p.SessionID != "" {
				o.ask(m.ID, p.SessionID)
			}
		}
	case side == acp.ToClient && m.Kind == acp.Response:
		o.answered(m)
	}
	if o.next != nil {
		o.next.Record(side, m, by)
	}
}

func (o *opened) ask(id []byte, session string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked[acp.IDKey(id)] = session
}

func (o *opened) answered(m *acp.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.asked) == 0 {
		return
	}
	key := acp.IDKey(m.ID)
	session, ok := o.asked[key]
	if !ok {
		return
	}
	delete(o.asked, key)
	if m.Error != nil {
		return
	}
	if session == "" {
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Result, &r) != nil || r.SessionID == "" {
			return
		}
		session = r.SessionID
	}
	o.id = session
}

// latest is the agent's session the run works in, "" when none is known.
func (o *opened) latest() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.id
}
