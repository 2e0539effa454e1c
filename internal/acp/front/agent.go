package front

// To the client: the front end's own answers, and the messages of the
// sessions' runs, with the blaise session id and the ids of the
// connection.

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/blaiseagent/blaise-agent/internal/acp"
)

func (w *clientWriter) write(raw []byte) { w.wrote(w.out.Write(raw)) }

// forward writes a message of a run to the client, without a copy when it
// is a line as the run's output was read.
func (w *clientWriter) forward(m *acp.Message) { w.wrote(w.out.WriteMessage(m, w.pace)) }

func (w *clientWriter) wrote(err error) {
	if err != nil {
		if !w.broken {
			w.log.Warn("writing to the client failed", "err", err)
		}
		w.broken = true
	}
}

func (w *clientWriter) reply(id []byte, result []byte) { w.write(acp.NewResponse(id, result)) }

func (w *clientWriter) replyError(id []byte, code int, msg string, data any) {
	var raw []byte
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	w.write(acp.NewErrorResponse(id, code, msg, raw))
}

func (w *clientWriter) notFound(m *acp.Message, id, reason string) {
	if m.Kind != acp.Request {
		w.log.Debug("dropped a notification for an unknown session", "method", m.Method, "session", id)
		return
	}
	w.replyError(m.ID, ResourceNotFound, "Resource not found", map[string]string{"sessionId": id, "reason": reason})
}

// maxBatch bounds the messages of a run handled as one event.
const maxBatch = 256

// appendReady appends to batch the messages ch holds already, up to max in
// all.
func appendReady(batch []*acp.Message, ch <-chan *acp.Message, max int) []*acp.Message {
	for len(batch) < max {
		select {
		case m, ok := <-ch:
			if !ok {
				return batch
			}
			batch = append(batch, m)
		default:
			return batch
		}
	}
	return batch
}

// fromRun passes a message of a session's run to the client.
func (c *conn) fromRun(sess *session, r Run, m *acp.Message) {
	if sess.run != r {
		return
	}
	switch m.Kind {
	case acp.Response:
		key := acp.IDKey(m.ID)
		p, ok := sess.pending[key]
		if sess.waiting != "" && key == sess.waiting && !ok {
			c.stepAnswered(sess, m)
			return
		}
		if !ok {
			c.log.Warn("a session answered a request the client did not make", "session", sess.id, "id", string(m.ID))
			return
		}
		delete(sess.pending, key)
		if sess.phase == ready && agentStopped(m) {
			// The agent is gone and the run is ending: what the client
			// sends now waits for the next run.
			sess.phase = draining
		}
		c.forward(c.answer(sess, p, m))
		if sess.waiting != "" && key == sess.waiting && sess.phase == settingUp {
			c.nextStep(sess)
		}
	case acp.Request:
		if c.closing {
			c.answerForClient(r, m.ID, m.Method)
			return
		}
		c.nextFront++
		front := []byte(strconv.FormatInt(c.nextFront, 10))
		c.frontReqs[acp.IDKey(front)] = frontReq{sess: sess, run: r, agentID: m.ID, method: m.Method}
		if sess.agentReq == nil {
			sess.agentReq = map[string][]byte{}
		}
		sess.agentReq[acp.IDKey(m.ID)] = front
		c.forward(sess.withSession(m).WithID(front))
	case acp.Notification:
		// Nothing of a notification is kept: its block may be read into
		// again once it is written.
		defer m.Release()
		if sess.swallow && m.Method == "session/update" {
			return
		}
		if m.Method == "$/cancel_request" {
			if front, ok := sess.agentReq[acp.IDKey(memberValue(m.Params, "requestId"))]; ok {
				m = m.WithParams(withMember(m.Params, "requestId", front))
			}
		}
		c.forwardWithSession(sess, m)
	case acp.Bundle:
		// session/updates with the blaise id already: passed on as they
		// are, unless the run's preparation swallows them.
		defer m.Release()
		if !sess.swallow {
			c.forward(m)
		}
	}
}

// forwardWithSession writes a message of a run to the client with the
// blaise session id in its params: of a line as the run's output was read,
// only the id is copied.
func (w *clientWriter) forwardWithSession(sess *session, m *acp.Message) {
	// Where the id is, the run's reader found while it checked the line.
	old := m.SessionID()
	if !otherString(old, sess.id) {
		w.forward(m)
		return
	}
	if sess.quotedID == nil {
		sess.quotedID = quote(sess.id)
	}
	w.wrote(w.out.WriteReplacing(m, old, sess.quotedID, w.pace))
}

// agentStoppedMessage is how a session process answers the requests its
// agent left unanswered when it stopped (acp.Proxy).
const agentStoppedMessage = acp.AgentStoppedMessage

// agentStopped reports whether m is such an answer.
func agentStopped(m *acp.Message) bool {
	if m.Error == nil || !bytes.Contains(m.Error, []byte(agentStoppedMessage)) {
		return false
	}
	var e rpcError
	return json.Unmarshal(m.Error, &e) == nil && e.Message == agentStoppedMessage
}

// withSession rewrites the agent's session id in params to the blaise id.
func (sess *session) withSession(m *acp.Message) *acp.Message {
	if params, ok := withString(m.Params, "sessionId", sess.id); ok {
		return m.WithParams(params)
	}
	return m
}

// answer post-processes the agent's answer to a client request.
func (c *conn) answer(sess *session, p pendingReq, m *acp.Message) *acp.Message {
	failed := m.Error != nil
	switch p.method {
	case "session/new":
		c.srv.startSettling()
		if failed {
			// The session never opened: it ends (stopRun).
			sess.phase = draining
			c.stopRun(sess)
			return m
		}
		if id, ok := stringMember(m.Result, "sessionId"); ok {
			sess.acpID = id
			c.log.Info("session opened", "session", sess.id, "acp_session", id)
			return m.WithResult(withMember(m.Result, "sessionId", quote(sess.id)))
		}
	case "session/close":
		if !failed && sess.acpID != "" && sess.phase == ready {
			// The client is done with the session for now: pause it.
			sess.phase = draining
			c.stopRun(sess)
		}
	}
	return m
}
