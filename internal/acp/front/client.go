package front

// The client's messages: routed to the session they name, which resumes
// when it is paused, or answered by the front end.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

func (c *conn) fromClient(m *acp.Message) {
	if m.Kind == acp.Response {
		c.clientResponse(m)
		return
	}
	if m.Method != "initialize" && c.initParams == nil {
		if m.Kind == acp.Request {
			c.replyError(m.ID, acp.InvalidRequest, "Invalid request", map[string]string{"reason": "initialize first"})
		}
		return
	}
	if c.srv.Settled != nil && needsSettled(m, c.sessions) {
		c.srv.startSettling()
		select {
		case <-c.srv.Settled:
		case <-c.ctx.Done():
		}
	}
	switch m.Method {
	case "initialize":
		c.initialize(m)
	case "session/new":
		c.newSession(m)
	case "session/load", "session/resume":
		c.loadSession(m)
	case "$/cancel_request":
		c.cancelRequest(m)
	default:
		if id, ok := stringMember(m.Params, "sessionId"); ok {
			c.sessionMessage(id, m)
			return
		}
		if acp.SessionScoped(m.Method) {
			// Not the agent's to answer: no session would take it.
			if m.Kind == acp.Request {
				reason := "sessionId is missing"
				if memberValue(m.Params, "sessionId") != nil {
					reason = "sessionId: want a string"
				}
				c.replyError(m.ID, acp.InvalidParams, "Invalid params", map[string]string{"reason": reason})
			}
			return
		}
		c.connectionMessage(m)
	}
}

// needsSettled tells whether m may concern a session of an earlier front
// end: all but initialize, session/new and the messages of the sessions
// held (by the connection).
func needsSettled(m *acp.Message, held map[string]*session) bool {
	switch m.Method {
	case "initialize", "session/new":
		return false
	}
	id, ok := stringMember(m.Params, "sessionId")
	return !ok || held[id] == nil
}

// clientResponse passes the client's answer to the run that asked.
func (c *conn) clientResponse(m *acp.Message) {
	key := acp.IDKey(m.ID)
	fr, ok := c.frontReqs[key]
	if !ok {
		c.log.Warn("the client answered a request no session made", "id", string(m.ID))
		return
	}
	delete(c.frontReqs, key)
	delete(fr.sess.agentReq, acp.IDKey(fr.agentID))
	if fr.sess.run != fr.run || fr.sess.phase == noRun || fr.sess.phase == launching {
		c.log.Debug("dropped an answer for a run that has ended", "session", fr.sess.id, "id", string(m.ID))
		return
	}
	if err := fr.run.Send(m.WithID(fr.agentID)); err != nil {
		c.log.Warn("passing the client's answer failed", "session", fr.sess.id, "err", err)
	}
}

// initialize answers the client without starting a session (that starts
// at session/new): with the chain's answer kept from earlier sessions, else
// the agent's, asked once (Capabilities), else the fixed set (advertise).
func (c *conn) initialize(m *acp.Message) {
	if m.Kind != acp.Request {
		return
	}
	if err := acp.CheckParams(m.Method, m.Params); err != nil {
		// As an agent would: nothing is kept, the client may ask again.
		c.replyError(m.ID, acp.InvalidParams, "Invalid params", map[string]string{"reason": err.Error()})
		return
	}
	if c.initParams != nil {
		// Asked again: the answer does not change.
		if c.told == nil {
			c.initIDs = append(c.initIDs, m.ID)
			return
		}
		c.reply(m.ID, c.told)
		return
	}
	c.initParams = m.Params
	c.initIDs = [][]byte{m.ID}
	caps := c.srv.Capabilities
	if caps == nil {
		c.answerInit(nil)
		return
	}
	if known, tried := caps.Known(); known != nil || tried {
		c.answerInit(known)
		return
	}
	// The first connection of this configuration and agent: the agent
	// answers, alone (no session starts); meanwhile the client's other
	// messages go on.
	c.active++
	params := c.initParams
	// Counted in c.active: the connection's loop waits for its event.
	go func() {
		err := caps.Learn(c.ctx, params, func(res []byte) { c.post(event{kind: learned, init: res}) })
		c.post(event{kind: learnEnded, err: err})
	}()
}

// answerInit answers the initialize requests waiting, with the agent's
// answer known; nil: the chain's last, from the transcripts.
func (c *conn) answerInit(known []byte) {
	if known == nil {
		known = c.srv.lastInitResult(c.ctx)
	}
	c.told, c.agentInit = c.srv.advertise(known, c.initParams), known
	for _, id := range c.initIDs {
		c.reply(id, c.told)
	}
	c.initIDs = nil
}

// newSession starts a session for the client's session/new: its first run
// gets the handshake, then the request. The session's directory, the host
// workspace of its plugs, is the cwd the client gives when it is a
// directory here; else the front end's.
//
// Params that no agent would take (no cwd, a relative one) are refused
// here, before any plug runs: a session would start only to end.
func (c *conn) newSession(m *acp.Message) {
	if reason := newSessionRefusal(m.Params); reason != "" {
		if m.Kind == acp.Request {
			c.replyError(m.ID, acp.InvalidParams, "Invalid params", map[string]string{"reason": reason})
		}
		return
	}
	sess := &session{setup: c.handshake()}
	cwd, _ := stringMember(m.Params, "cwd")
	if fi, err := os.Stat(cwd); err == nil && fi.IsDir() {
		sess.dir = filepath.Clean(cwd)
	} else {
		c.log.Info("the cwd of session/new is not a directory here; the session runs in blaise-agent's", "cwd", cwd)
	}
	c.opening = append(c.opening, sess)
	c.last = sess
	c.launch(sess, false)
	c.deliver(sess, m)
}

// newSessionRefusal says why params of session/new are refused, or "":
// only for the members ACP requires, so that what a newer client adds
// (a kind of MCP server this build does not know) is the agent's to judge.
func newSessionRefusal(params []byte) string {
	cwd := memberValue(params, "cwd")
	servers := memberValue(params, "mcpServers")
	switch {
	case len(cwd) == 0:
		return "missing cwd"
	case cwd[0] != '"':
		return "cwd: want a string"
	case len(servers) == 0:
		return "missing mcpServers"
	case servers[0] != '[':
		return "mcpServers: want an array"
	}
	if dir, _ := stringMember(params, "cwd"); !filepath.IsAbs(dir) {
		return "cwd must be an absolute path"
	}
	return ""
}

// loadSession resumes a paused session for the client's session/load (or
// session/resume) and passes the request on.
func (c *conn) loadSession(m *acp.Message) {
	id, ok := stringMember(m.Params, "sessionId")
	if !ok {
		if m.Kind == acp.Request {
			c.replyError(m.ID, acp.InvalidParams, "Invalid params", map[string]string{"reason": "sessionId is missing"})
		}
		return
	}
	sess, reason := c.lookup(id)
	if sess == nil {
		c.notFound(m, id, reason)
		return
	}
	c.last = sess
	if sess.phase == noRun {
		// The client's load is what opens the ACP session: the client
		// sees the replay.
		sess.queue = append(sess.queue, m)
		if c.canResume(sess) == nil {
			return
		}
		sess.setup = c.handshake()
		c.launch(sess, true)
		return
	}
	c.deliver(sess, m)
}

// sessionMessage routes a message of one session, resuming the session when
// it is paused.
func (c *conn) sessionMessage(id string, m *acp.Message) {
	sess, reason := c.lookup(id)
	if sess == nil {
		c.notFound(m, id, reason)
		return
	}
	c.last = sess
	if sess.phase == noRun {
		switch {
		case m.Method == "session/cancel":
			c.answerCancel(m) // nothing runs
			return
		case m.Method == "session/close" && m.Kind == acp.Request:
			c.reply(m.ID, []byte("{}"))
			return
		}
		sess.queue = append(sess.queue, m)
		c.resume(sess)
		return
	}
	if (m.Method == "session/cancel" || m.Method == "session/close") && sess.phase == ready && c.srv.stopping(c.ctx, sess) {
		sess.phase = draining
	}
	if sess.phase != ready {
		switch {
		case m.Method == "session/cancel":
			// Prompts still waiting for the run are cancelled here; a
			// stopping run is told too, as far as it still listens.
			c.cancelQueued(sess)
			if sess.phase == draining && len(sess.pending) > 0 {
				_ = sess.run.Send(sess.toAgent(m))
			}
			c.answerCancel(m)
			return
		case m.Method == "session/close" && m.Kind == acp.Request && sess.phase == draining:
			c.reply(m.ID, []byte("{}")) // the run stops anyway
			return
		}
	}
	c.deliver(sess, m)
}

// answerCancel answers a session/cancel sent as a request, which ACP sends
// as a notification, where the front end handles it: every request gets
// an answer, as an agent's would be.
func (w *clientWriter) answerCancel(m *acp.Message) {
	if m.Kind == acp.Request {
		w.reply(m.ID, []byte("null"))
	}
}

// cancelQueued answers the session's queued prompts as cancelled.
func (w *clientWriter) cancelQueued(sess *session) {
	q := sess.queue[:0]
	for _, m := range sess.queue {
		if m.Kind == acp.Request && m.Method == "session/prompt" {
			w.reply(m.ID, []byte(`{"stopReason":"cancelled"}`))
			continue
		}
		q = append(q, m)
	}
	sess.queue = q
}

// cancelRequest passes the client's $/cancel_request to the run its request
// went to, or cancels a request still waiting for its run.
func (c *conn) cancelRequest(m *acp.Message) {
	key := acp.IDKey(memberValue(m.Params, "requestId"))
	for _, sess := range c.allSessions() {
		if _, ok := sess.pending[key]; ok && sess.run != nil {
			c.send(sess, m)
			return
		}
		for i, q := range sess.queue {
			if q.Kind == acp.Request && acp.IDKey(q.ID) == key {
				sess.queue = append(sess.queue[:i], sess.queue[i+1:]...)
				c.replyError(q.ID, acp.RequestCancelled, "Request cancelled", nil)
				return
			}
		}
	}
}

// connectionMessage answers a message of no session. None starts a run:
// session/list is answered from the store, authenticate is kept for the
// runs' handshakes, and extensions go to the run of the session the client
// addressed last.
func (c *conn) connectionMessage(m *acp.Message) {
	switch {
	case m.Method == "session/list" && m.Kind == acp.Request:
		c.listSessions(m)
	case m.Method == "authenticate" && m.Kind == acp.Request:
		// The agent's verdict comes with the next session/new or
		// session/load, whose run authenticates first.
		c.authParams = m.Params
		if c.authParams == nil {
			c.authParams = []byte("{}")
		}
		c.reply(m.ID, []byte("{}"))
	case c.last != nil && !c.last.over && !c.last.ending && c.last.phase != noRun:
		c.deliver(c.last, m)
	case m.Kind == acp.Request:
		c.replyError(m.ID, acp.MethodNotFound, "Method not found", map[string]string{"reason": "no agent is running to take it: agents start with session/new or session/load"})
	default:
		c.log.Debug("dropped a notification of no session", "method", m.Method)
	}
}

// lookup finds a session by its blaise id, in this connection or in the
// store (a paused session of an earlier connection). It returns nil and
// why when there is no session to talk to.
func (c *conn) lookup(id string) (*session, string) {
	if sess, ok := c.sessions[id]; ok {
		if sess.over {
			return nil, "the session has ended"
		}
		if sess.ending {
			return nil, "the session is ending"
		}
		return sess, ""
	}
	rec, err := c.srv.Sessions.Session(c.ctx, id)
	if err != nil {
		return nil, "no such session"
	}
	switch rec.State {
	case lifecycle.Paused:
	case lifecycle.Active:
		if r := c.srv.Sessions.Claim(c.ctx, id); r != nil {
			// A run no front end holds goes on with this client.
			sess := &session{id: id, acpID: rec.ACPSessionID}
			c.sessions[id] = sess
			sess.phase = launching
			c.active++
			c.launched(sess, r, nil)
			return sess, ""
		}
		return nil, inUse(rec)
	default:
		return nil, "the session is " + string(rec.State)
	}
	if _, due := lifecycle.Due(rec, time.Now()); due {
		return nil, "the session has expired"
	}
	if rec.ACPSessionID == "" {
		return nil, "the session has no ACP session"
	}
	sess := &session{id: id, acpID: rec.ACPSessionID}
	c.sessions[id] = sess
	return sess, ""
}

// holders are the clients whose front ends in this process run sessions,
// by session id: a refusal names who holds a session. (Front ends of other
// processes are not known.)
var holders sync.Map // string -> *holder

// holder is a client that runs a session, since when.
type holder struct {
	client string
	since  time.Time
}

// clientName is the client's name from its initialize (clientInfo), or
// what stands for it.
func (g *greeting) clientName() string {
	var p struct {
		ClientInfo *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"clientInfo"`
	}
	if json.Unmarshal(g.initParams, &p) != nil || p.ClientInfo == nil || p.ClientInfo.Name == "" {
		return "an ACP client that gave no name"
	}
	return strings.TrimSpace(p.ClientInfo.Name + " " + p.ClientInfo.Version)
}

// inUse says that another front end runs a session, who (when it is of
// this process), and until when at the latest it holds it: until its
// client leaves, or stays silent for the session's inactivity limit (L1).
func inUse(rec *lifecycle.Record) string {
	who := "an editor, `run`, or the dashboard"
	if h, ok := holders.Load(rec.ID); ok {
		h := h.(*holder)
		who = h.client + ", since " + h.since.UTC().Format("15:04:05 UTC")
	}
	return fmt.Sprintf("the session has a run in progress in another front end (%s); it is free once that client leaves, or after %s without a message from it (its inactivity limit)",
		who, rec.Settings.InactivityLimit)
}

// deliver passes a message to the session's run, or queues it while the run
// starts or stops.
func (c *conn) deliver(sess *session, m *acp.Message) {
	switch sess.phase {
	case ready:
		if c.srv.stopping(c.ctx, sess) {
			sess.phase = draining
			sess.queue = append(sess.queue, m)
			return
		}
		c.send(sess, m)
	case noRun:
		sess.queue = append(sess.queue, m)
		c.resume(sess)
	default:
		sess.queue = append(sess.queue, m)
	}
}

// stopping reports whether a stop directive went to the session's run: a
// message sent now could be lost with the run, so it waits for the next one.
func (s *Server) stopping(ctx context.Context, sess *session) bool {
	select {
	case <-sess.run.Done():
		return true
	default:
	}
	// Asked while the runs stop too, after the connection's ctx ended.
	rec, err := s.Sessions.Session(context.WithoutCancel(ctx), sess.id)
	if err != nil {
		return false
	}
	n := sess.run.Number()
	return rec.State != lifecycle.Active || rec.Runs != n || (rec.Stop != nil && rec.Stop.Run == n)
}

// send writes a client message to the session's run, with the agent's
// session id.
func (c *conn) send(sess *session, m *acp.Message) {
	orig := m
	if m.Kind == acp.Request {
		if sess.pending == nil {
			sess.pending = map[string]pendingReq{}
		}
		sess.pending[acp.IDKey(m.ID)] = pendingReq{id: m.ID, method: m.Method}
	}
	m = sess.toAgent(m)
	if err := sess.run.Send(m); err != nil {
		// The run is ending: the message waits for the next one.
		c.log.Debug("the session's run is gone; the message waits for the next run", "session", sess.id, "method", m.Method, "err", err)
		if m.Kind == acp.Request {
			delete(sess.pending, acp.IDKey(m.ID))
		}
		sess.phase = draining
		sess.queue = append(sess.queue, orig)
	}
}

// toAgent rewrites the session id in a client message to the agent's.
func (sess *session) toAgent(m *acp.Message) *acp.Message {
	if sess.acpID != "" {
		if params, ok := withString(m.Params, "sessionId", sess.acpID); ok {
			return m.WithParams(params)
		}
	}
	return m
}

// failQueue answers the session's queued requests with an error.
func (w *clientWriter) failQueue(sess *session, code int, msg, reason string) {
	sess.setup = nil
	data := map[string]string{"reason": reason}
	if sess.id != "" {
		data["sessionId"] = sess.id
	}
	for _, q := range sess.queue {
		if q.Kind == acp.Request {
			w.replyError(q.ID, code, msg, data)
		}
	}
	sess.queue = nil
}
