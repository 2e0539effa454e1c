package front

// The runs of a session: launched, prepared with the front end's own
// requests (the handshake, the load of a resume), and settled when they
// end.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// handshake is what a new run gets before the client's messages: the
// client's initialize and authenticate, answers swallowed.
func (g *greeting) handshake() []step {
	steps := []step{{method: "initialize", params: g.initParams}}
	if g.authParams != nil {
		steps = append(steps, step{method: "authenticate", params: g.authParams})
	}
	return steps
}

// resume starts a resume run that loads the session's ACP session again
// before the queued messages go through (L6).
func (c *conn) resume(sess *session) {
	if sess.acpID == "" {
		c.failQueue(sess, ResourceNotFound, "Resource not found", "the session has no ACP session to load")
		return
	}
	rec := c.canResume(sess)
	if rec == nil {
		return
	}
	sess.setup = append(c.handshake(), c.loadStep(sess, rec))
	c.launch(sess, true)
}

// canResume checks the stored session before a resume run and returns its
// record; when it cannot resume, the session is over, its queued requests
// are answered, and canResume returns nil.
func (c *conn) canResume(sess *session) *lifecycle.Record {
	rec, err := c.srv.Sessions.Session(c.ctx, sess.id)
	reason := ""
	switch {
	case err != nil:
		reason = "no such session"
	case rec.State != lifecycle.Paused:
		reason = "the session is " + string(rec.State)
	default:
		if _, due := lifecycle.Due(rec, time.Now()); due {
			reason = "the session has expired"
		}
	}
	if reason == "" {
		return rec
	}
	if err == nil && rec.State == lifecycle.Active {
		// Not ours to touch: another front end runs it.
		c.failQueue(sess, acp.InternalError, "Internal error", inUse(rec))
		return nil
	}
	sess.over = true
	c.failQueue(sess, ResourceNotFound, "Resource not found", reason)
	return nil
}

// loadStep is the session/load of a transparent resume, with the cwd and
// mcpServers the session was last opened with (its record keeps them).
func (g *greeting) loadStep(sess *session, rec *lifecycle.Record) step {
	cwd := rec.CWD
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	// On one line: the store may keep it indented.
	var mcp bytes.Buffer
	if json.Compact(&mcp, rec.MCPServers) != nil || mcp.Len() == 0 {
		mcp.Reset()
		mcp.WriteString("[]")
	}
	params := []byte(`{"sessionId":` + string(quote(sess.acpID)) + `,"cwd":` + string(quote(cwd)) + `,"mcpServers":` + mcp.String() + `}`)
	method := "session/load"
	if !g.agentCan("loadSession") && g.agentCan("sessionCapabilities", "resume") {
		method = "session/resume"
	}
	return step{method: method, params: params, swallow: true}
}

// agentCan reports whether the agent's last known initialize result (with
// none, what the client was told) has the capability at path under
// agentCapabilities (true, or an object).
func (g *greeting) agentCan(path ...string) bool {
	init := g.agentInit
	if init == nil {
		init = g.told
	}
	v := memberValue(init, "agentCapabilities")
	for _, k := range path {
		v = memberValue(v, k)
	}
	return len(v) > 0 && (string(v) == "true" || v[0] == '{')
}

// launch starts (or resumes) a run of the session in the background.
func (c *conn) launch(sess *session, resume bool) {
	sess.phase = launching
	c.active++
	id := sess.id
	// A run that starts is the front end's to stop, even once c.ctx ended.
	ctx := context.WithoutCancel(c.ctx)
	// Counted in c.active: the connection's loop waits for its event.
	go func() {
		var r Run
		var err error
		if resume {
			r, err = c.srv.Sessions.Resume(ctx, id)
		} else {
			r, err = c.srv.Sessions.Start(ctx, c.srv.Config, sess.dir)
		}
		c.post(event{kind: launched, sess: sess, run: r, err: err})
	}()
}

func (c *conn) launched(sess *session, r Run, err error) {
	if i := slices.Index(c.opening, sess); i >= 0 {
		c.opening = slices.Delete(c.opening, i, i+1)
	}
	if err != nil {
		c.active--
		sess.phase = noRun
		code, msg := acp.InternalError, "Internal error"
		if sess.id != "" {
			if rec, rerr := c.srv.Sessions.Session(context.WithoutCancel(c.ctx), sess.id); rerr != nil || rec.State != lifecycle.Paused {
				sess.over = true
				code, msg = ResourceNotFound, "Resource not found"
			}
		}
		c.log.Error("starting a run failed", "session", sess.id, "err", err)
		c.failQueue(sess, code, msg, err.Error())
		return
	}
	sess.run = r
	if sess.id == "" {
		sess.id = r.SessionID()
		c.sessions[sess.id] = sess
	}
	sess.holder = &holder{client: c.clientName(), since: time.Now()}
	holders.Store(sess.id, sess.holder)
	c.log.Info("session run started", "session", sess.id, "run", r.Number())
	// Counted in c.active until runDone: the connection's loop waits for it.
	go func() {
		msgs := r.Messages()
		for m := range msgs {
			// What has arrived meanwhile goes with it: one event, not one
			// each, while the run streams.
			batch := append(make([]*acp.Message, 0, 16), m)
			batch = appendReady(batch, msgs, maxBatch)
			c.post(event{kind: runMessages, sess: sess, run: r, msgs: batch})
		}
		<-r.Done()
		c.post(event{kind: runDone, sess: sess, run: r})
	}()
	c.nextStep(sess)
}

// nextStep sends the next of the front end's requests, or, when there is
// none left, lets the queued client messages through.
func (c *conn) nextStep(sess *session) {
	if len(sess.setup) == 0 {
		sess.phase = ready
		sess.waiting, sess.swallow = "", false
		q := sess.queue
		sess.queue = nil
		for i, m := range q {
			c.deliver(sess, m)
			if sess.phase != ready {
				sess.queue = append(sess.queue, q[i+1:]...)
				return
			}
		}
		return
	}
	sess.phase = settingUp
	st := sess.setup[0]
	sess.setup = sess.setup[1:]
	sess.waitFor = st.method
	c.nextOwn++
	id := quote("blaise-acp-" + strconv.FormatInt(c.nextOwn, 10))
	m, err := acp.Parse(acp.NewRequest(id, st.method, st.params))
	if err != nil {
		panic("acpfront: building a request: " + err.Error())
	}
	sess.waiting, sess.swallow = acp.IDKey(id), st.swallow
	if err := sess.run.Send(m); err != nil {
		c.setupFailed(sess, st.method, err.Error())
	}
}

// setupFailed gives up on the run, which stops. The waiting requests get
// the error when it has ended (runEnded): its record may say more, such as
// the agent that could not start.
func (c *conn) setupFailed(sess *session, method, reason string) {
	c.log.Error("preparing the session's run failed", "session", sess.id, "step", method, "err", reason)
	sess.waiting, sess.swallow, sess.setup = "", false, nil
	sess.failure = method + ": " + reason
	sess.phase = draining
	c.stopRun(sess)
}

// stopRun stops a run: as idle under the policy (L9), or, for a run with no
// ACP session, as closed: there is nothing to come back to.
func (c *conn) stopRun(sess *session) {
	var err error
	if sess.acpID == "" {
		err = sess.run.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	} else {
		err = sess.run.StopIdle()
	}
	if err != nil {
		c.log.Debug("stopping the run", "session", sess.id, "err", err)
	}
}

// stepAnswered goes on with the run's preparation.
func (c *conn) stepAnswered(sess *session, m *acp.Message) {
	if m.Error != nil {
		c.setupFailed(sess, sess.waitFor, describeError(m.Error))
		return
	}
	if sess.waitFor == "initialize" {
		c.agentInit = m.Result
		c.log.Debug("the agent answered initialize", "session", sess.id, "result", string(m.Result))
		if caps := c.srv.Capabilities; caps != nil {
			if err := caps.Keep(m.Result); err != nil {
				c.log.Warn("keeping the agent's capabilities", "err", err)
			}
		}
	}
	c.nextStep(sess)
}

// runEnded settles a session whose run has ended: its requests still
// waiting for the run are answered with an error that says why, and
// messages that arrived while it stopped start the next run.
func (c *conn) runEnded(sess *session, r Run) {
	c.active--
	if sess.run != r {
		return
	}
	holders.CompareAndDelete(sess.id, sess.holder)
	// The runs end after c.ctx too, when the front end stops them.
	rec, err := c.srv.Sessions.Session(context.WithoutCancel(c.ctx), sess.id)
	// A run that ended before it was ready is not started again for what
	// waits: that would go on for ever when the agent cannot start.
	broke := sess.failure != "" || sess.waiting != ""
	cause := sess.failure
	if err == nil && rec.Pause != nil && rec.Pause.Run == r.Number() && rec.Pause.Reason == lifecycle.Failed && rec.Pause.Error != "" {
		cause = rec.Pause.Error
	}
	sess.failure = ""
	reason := fmt.Sprintf("run %d of the session ended before answering", r.Number())
	if cause != "" {
		reason += ": " + cause
	}
	if sess.acpID != "" {
		reason += "; send the request again"
	}
	for key, p := range sess.pending {
		c.replyError(p.id, acp.InternalError, "Internal error", map[string]string{"sessionId": sess.id, "reason": reason})
		delete(sess.pending, key)
	}
	for key, front := range sess.agentReq {
		delete(c.frontReqs, acp.IDKey(front))
		delete(sess.agentReq, key)
		if !c.closing {
			c.write(acp.NewNotification("$/cancel_request", []byte(`{"requestId":`+string(front)+`}`)))
		}
	}
	if sess.waiting != "" {
		sess.waiting, sess.swallow, sess.setup = "", false, nil
	}
	sess.run, sess.phase = nil, noRun
	switch {
	case err != nil:
		c.log.Warn("reading the session", "session", sess.id, "err", err)
	case rec.State == lifecycle.Paused && sess.acpID == "":
		// Ended below: it never opened.
	case rec.State == lifecycle.Paused:
		var reason lifecycle.Reason
		if rec.Pause != nil {
			reason = rec.Pause.Reason
		}
		if cause != "" {
			// The editor's log says why, not only sessions show.
			c.log.Warn("session paused", "session", sess.id, "run", r.Number(), "reason", reason, "err", cause)
		} else {
			c.log.Info("session paused", "session", sess.id, "run", r.Number(), "reason", reason)
		}
	default:
		sess.over = true
		c.log.Info("session over", "session", sess.id, "state", rec.State, "reason", rec.EndReason)
	}
	if sess.acpID == "" || broke {
		// A session that never opened ends: nobody can load it. What
		// waited for the run learns why it could not start.
		if sess.acpID == "" && !sess.over && err == nil {
			c.log.Warn("session could not start; it ends", "session", sess.id, "run", r.Number(), "err", cmp.Or(cause, "its run ended first"))
			sess.ending = true
			c.active++
			// Counted in c.active: the connection's loop waits for its event.
			go func() {
				err := c.srv.Sessions.End(context.Background(), sess.id)
				c.post(event{kind: ended, sess: sess, err: err})
			}()
		}
		why := "the session could not start"
		if sess.acpID != "" {
			why = "the session could not resume"
		}
		if cause != "" {
			why += ": " + cause
		}
		c.failQueue(sess, acp.InternalError, "Internal error", why)
		return
	}
	if len(sess.queue) == 0 {
		return
	}
	if c.force {
		c.failQueue(sess, acp.InternalError, "Internal error", c.gone)
		return
	}
	if sess.over {
		c.failQueue(sess, ResourceNotFound, "Resource not found", "the session has ended")
		return
	}
	c.resume(sess)
}
