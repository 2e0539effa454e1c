// Package acpfront presents a blaise-agent chain as an ACP agent to one
// client on one connection (`blaise-agent acp`, design §1): the client sees
// one agent; behind it every ACP session is a blaise session whose runs go
// through the plugs, each in a session process of its own (C13).
//
// Ids. The session ids the client sees are blaise session ids; the agent's
// own ACP session ids (stored as SessionRecord.ACPSessionID) stay behind the
// front end. `sessionId` is rewritten in the params of every message each
// way, and in the result of session/new. The client's request ids go as they
// are to the one session process concerned; requests of the session
// processes (permission, fs, terminal …) get ids of the connection, so that
// two sessions never send the client the same id, and their answers are
// mapped back. Messages are patched in their raw JSON: what is not rewritten
// reaches the other side byte for byte.
//
// Lifecycle. Nothing starts before the client asks for a session:
// initialize is answered by the front end (advertise), session/list from
// the store, and authenticate is kept for the runs. session/new starts a
// session; each run gets the client's initialize (and authenticate) first,
// their answers swallowed, and a handshake the agent refuses fails the
// session/new with the agent's error. The engine stops a run that was
// inactive too long (L1); the session pauses and the front end keeps it, so
// the next message to it starts a resume run transparently: initialize
// again, session/load of the agent's session (its replayed history
// swallowed), then the message. A session/load from the client of a paused
// session resumes it too, and the client sees the replay. When the client
// disconnects, what it asked is still answered, the agents' requests it can
// no longer answer are answered for it, and every session stops as idle
// under its idle policy (L9); the front end returns once the runs have
// ended.
//
// Failures. A run that ends (a crash, a stop) with client requests in flight
// answers them with an error that says why (the run's failure as recorded);
// the session pauses or ends as the engine records it, and the other
// sessions go on. A session whose first run ends before it opened is ended.
package acpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/acp"
	lifecycle "github.com/blaiseagent/blaise-agent/session"
	"github.com/charmbracelet/log"
)

// ResourceNotFound is ACP's error code for an unknown session.
const ResourceNotFound = -32002

// DefaultShutdownTimeout bounds how long Run waits, once the client is gone,
// for the runs to pause or end.
const DefaultShutdownTimeout = 2 * time.Minute

// Server serves one ACP client.
type Server struct {
	Sessions Sessions
	// Config is the configuration (blaise.star) of new sessions.
	Config string
	In     io.Reader // the client's messages
	Out    io.Writer // to the client: nothing but ACP messages
	Log    *log.Logger
	// ShutdownTimeout: 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// MaxLine bounds the lines read from the client; 0: acp.DefaultMaxLine.
	MaxLine int
	// Version is blaise-agent's, in agentInfo before any agent answered.
	Version string
}

// Run serves the client until it disconnects (end of In) or ctx ends, then
// stops every session as idle (L9) and returns once their runs have ended or
// the shutdown timeout has passed.
func (s *Server) Run(ctx context.Context) error {
	logger := s.Log
	if logger == nil {
		logger = log.Default()
	}
	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	c := &conn{
		srv:       s,
		log:       logger,
		out:       acp.NewWriter(s.Out),
		events:    make(chan event, 64),
		quit:      make(chan struct{}),
		sessions:  map[string]*session{},
		frontReqs: map[string]frontReq{},
	}
	defer close(c.quit)
	client := acp.ReadMessages(s.In, s.MaxLine, logger)
	var deadline <-chan time.Time
	done := ctx.Done()
	for {
		if c.closing {
			c.settle()
			if c.active == 0 {
				break
			}
		}
		select {
		case m, ok := <-client:
			if !ok {
				client = nil
				if !c.closing {
					logger.Info("the client disconnected; stopping its sessions")
					c.shutdown("the client disconnected")
					deadline = time.After(timeout)
				}
				continue
			}
			if !c.closing {
				c.fromClient(m)
			}
		case ev := <-c.events:
			c.handle(ev)
		case <-done:
			done = nil
			if !c.closing {
				logger.Info("stopping the sessions", "cause", context.Cause(ctx))
				c.shutdown(fmt.Sprintf("blaise-agent acp is stopping (%v)", context.Cause(ctx)))
				deadline = time.After(timeout)
			}
			c.forceStop()
		case <-deadline:
			if !c.force {
				logger.Warn("requests still unanswered after the shutdown timeout; stopping the sessions", "timeout", timeout)
				c.forceStop()
				deadline = time.After(timeout)
				continue
			}
			logger.Warn("runs still going after the shutdown timeout; leaving them to stop on their own", "runs", c.active, "timeout", timeout)
			_ = c.out.Flush()
			return nil
		}
	}
	return c.out.Flush()
}

// A phase is where a session's run is.
type phase uint8

const (
	noRun     phase = iota // paused (or never started)
	launching              // Start or Resume in progress
	settingUp              // the front end's own requests in progress
	ready                  // client messages go through
	draining               // the run is stopping; messages wait for the next run
)

// session is a blaise session as this connection knows it.
type session struct {
	id string // blaise session id; "" until its first run is launched
	// quotedID is id as a JSON string, once a message needed it.
	quotedID []byte
	acpID    string // the agent's ACP session id; "" until session/new answers
	run      Run
	phase    phase
	// over: the session ended; messages to it get ResourceNotFound.
	over bool

	setup    []step // the front end's requests still to send
	waiting  string // IDKey of the front end's request in flight
	waitFor  string // its method
	failure  string // why the run could not be prepared, for what waits on it
	swallow  bool   // drop session/update: the replay of a swallowed load
	queue    []*acp.Message
	pending  map[string]pendingReq // client requests sent to the run, by IDKey
	agentReq map[string][]byte     // agent request ids (IDKey) → front ids
	ending   bool                  // an End of the session is in progress
}

type pendingReq struct {
	id     []byte
	method string
}

// step is a request the front end sends to a run on its own account; its
// answer is swallowed.
type step struct {
	method  string
	params  []byte
	swallow bool // drop the session/updates that arrive meanwhile
}

// frontReq is an agent's request as the client knows it.
type frontReq struct {
	sess    *session
	run     Run
	agentID []byte
	method  string
}

type eventKind uint8

const (
	runMessages eventKind = iota
	runDone
	launched
	ended
)

type event struct {
	kind eventKind
	sess *session
	run  Run
	msgs []*acp.Message // of runMessages, in the order the run sent them
	err  error
}

// conn is the state of the connection; only Run's goroutine touches it.
type conn struct {
	srv    *Server
	log    *log.Logger
	out    *acp.Writer
	events chan event
	quit   chan struct{}

	sessions map[string]*session // by blaise id
	opening  []*session          // sessions whose first run is launching
	last     *session            // the session the client addressed last

	initParams []byte // the client's initialize params, once answered
	told       []byte // the initialize result the client got
	agentInit  []byte // the agent's last initialize result known, nil if none
	authParams []byte // the client's last authenticate

	frontReqs map[string]frontReq // by IDKey of the front id
	nextFront int64
	nextOwn   int64

	active  int    // runs launching or running, and Ends in progress
	closing bool   // the client is gone, or the front end is stopping
	gone    string // why, for the requests that will not be answered
	// force: stop every run now, answered or not (the client's output is
	// broken, or the shutdown took too long).
	force  bool
	broken bool // writing to the client failed
}

func (c *conn) post(ev event) {
	select {
	case c.events <- ev:
	case <-c.quit:
	}
}

// --- to the client ---

func (c *conn) write(raw []byte) { c.wrote(c.out.Write(raw)) }

// forward writes a message of a run to the client, without a copy when it
// is a line as the run's output was read.
func (c *conn) forward(m *acp.Message) { c.wrote(c.out.WriteMessage(m, true)) }

func (c *conn) wrote(err error) {
	if err != nil {
		if !c.broken {
			c.log.Warn("writing to the client failed", "err", err)
		}
		c.broken = true
	}
}

func (c *conn) reply(id []byte, result []byte) { c.write(acp.NewResponse(id, result)) }

func (c *conn) replyError(id []byte, code int, msg string, data any) {
	var raw []byte
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	c.write(acp.NewErrorResponse(id, code, msg, raw))
}

func (c *conn) notFound(m *acp.Message, id, reason string) {
	if m.Kind != acp.Request {
		c.log.Debug("dropped a notification for an unknown session", "method", m.Method, "session", id)
		return
	}
	c.replyError(m.ID, ResourceNotFound, "Resource not found", map[string]string{"sessionId": id, "reason": reason})
}

// --- from the client ---

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
		c.connectionMessage(m)
	}
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

// initialize answers the client without starting anything: a session
// starts at session/new, and the capabilities are known from the chain's
// earlier answers (advertise).
func (c *conn) initialize(m *acp.Message) {
	if m.Kind != acp.Request {
		return
	}
	if c.initParams == nil {
		c.initParams = m.Params
		if c.initParams == nil {
			c.initParams = []byte("{}")
		}
		c.told, c.agentInit = c.srv.advertise(m.Params)
	}
	// Asked again: the answer does not change.
	c.reply(m.ID, c.told)
}

// handshake is what a new run gets before the client's messages: the
// client's initialize and authenticate, answers swallowed.
func (c *conn) handshake() []step {
	steps := []step{{method: "initialize", params: c.initParams}}
	if c.authParams != nil {
		steps = append(steps, step{method: "authenticate", params: c.authParams})
	}
	return steps
}

// newSession starts a session for the client's session/new: its first run
// gets the handshake, then the request.
func (c *conn) newSession(m *acp.Message) {
	sess := &session{setup: c.handshake()}
	c.opening = append(c.opening, sess)
	c.last = sess
	c.launch(sess, false)
	c.deliver(sess, m)
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
			return // nothing runs
		case m.Method == "session/close" && m.Kind == acp.Request:
			c.reply(m.ID, []byte("{}"))
			return
		}
		sess.queue = append(sess.queue, m)
		c.resume(sess)
		return
	}
	if (m.Method == "session/cancel" || m.Method == "session/close") && sess.phase == ready && c.stopping(sess) {
		sess.phase = draining
	}
	if sess.phase != ready {
		switch {
		case m.Method == "session/cancel":
			// Prompts still waiting for the run are cancelled here; a
			// stopping run is told too, as far as it still listens.
			c.cancelQueued(sess)
			if sess.phase == draining && len(sess.pending) > 0 {
				_ = sess.run.Send(c.toAgent(sess, m))
			}
			return
		case m.Method == "session/close" && m.Kind == acp.Request && sess.phase == draining:
			c.reply(m.ID, []byte("{}")) // the run stops anyway
			return
		}
	}
	c.deliver(sess, m)
}

// cancelQueued answers the session's queued prompts as cancelled.
func (c *conn) cancelQueued(sess *session) {
	q := sess.queue[:0]
	for _, m := range sess.queue {
		if m.Kind == acp.Request && m.Method == "session/prompt" {
			c.reply(m.ID, []byte(`{"stopReason":"cancelled"}`))
			continue
		}
		q = append(q, m)
	}
	sess.queue = q
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
	rec, err := c.srv.Sessions.Session(sess.id)
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
		c.failQueue(sess, acp.InternalError, "Internal error", "the session has a run in progress in another front end")
		return nil
	}
	sess.over = true
	c.failQueue(sess, ResourceNotFound, "Resource not found", reason)
	return nil
}

// loadStep is the session/load of a transparent resume, with the cwd and
// mcpServers the session was last opened with (its record keeps them).
func (c *conn) loadStep(sess *session, rec *lifecycle.Record) step {
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
	if !c.agentCan("loadSession") && c.agentCan("sessionCapabilities", "resume") {
		method = "session/resume"
	}
	return step{method: method, params: params, swallow: true}
}

// agentCan reports whether the agent's last known initialize result (with
// none, what the client was told) has the capability at path under
// agentCapabilities (true, or an object).
func (c *conn) agentCan(path ...string) bool {
	init := c.agentInit
	if init == nil {
		init = c.told
	}
	v := memberValue(init, "agentCapabilities")
	for _, k := range path {
		v = memberValue(v, k)
	}
	return len(v) > 0 && (string(v) == "true" || v[0] == '{')
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
	rec, err := c.srv.Sessions.Session(id)
	if err != nil {
		return nil, "no such session"
	}
	switch rec.State {
	case lifecycle.Paused:
	case lifecycle.Active:
		return nil, "the session has a run in progress in another front end"
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

// deliver passes a message to the session's run, or queues it while the run
// starts or stops.
func (c *conn) deliver(sess *session, m *acp.Message) {
	switch sess.phase {
	case ready:
		if c.stopping(sess) {
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
func (c *conn) stopping(sess *session) bool {
	select {
	case <-sess.run.Done():
		return true
	default:
	}
	rec, err := c.srv.Sessions.Session(sess.id)
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
	m = c.toAgent(sess, m)
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
func (c *conn) toAgent(sess *session, m *acp.Message) *acp.Message {
	if sess.acpID != "" {
		if params, ok := withString(m.Params, "sessionId", sess.acpID); ok {
			return m.WithParams(params)
		}
	}
	return m
}

// failQueue answers the session's queued requests with an error.
func (c *conn) failQueue(sess *session, code int, msg, reason string) {
	sess.setup = nil
	data := map[string]string{"reason": reason}
	if sess.id != "" {
		data["sessionId"] = sess.id
	}
	for _, q := range sess.queue {
		if q.Kind == acp.Request {
			c.replyError(q.ID, code, msg, data)
		}
	}
	sess.queue = nil
}

// --- runs ---

// launch starts (or resumes) a run of the session in the background.
func (c *conn) launch(sess *session, resume bool) {
	sess.phase = launching
	c.active++
	id := sess.id
	go func() {
		var r Run
		var err error
		if resume {
			r, err = c.srv.Sessions.Resume(id)
		} else {
			r, err = c.srv.Sessions.Start(c.srv.Config)
		}
		c.post(event{kind: launched, sess: sess, run: r, err: err})
	}()
}

func (c *conn) handle(ev event) {
	switch ev.kind {
	case launched:
		c.launched(ev.sess, ev.run, ev.err)
	case runMessages:
		for _, m := range ev.msgs {
			c.fromRun(ev.sess, ev.run, m)
		}
	case runDone:
		c.runEnded(ev.sess, ev.run)
	case ended:
		c.active--
		ev.sess.ending = false
		ev.sess.over = true
		if ev.err != nil {
			c.log.Warn("ending an unused session failed", "session", ev.sess.id, "err", ev.err)
		}
	}
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
			if rec, rerr := c.srv.Sessions.Session(sess.id); rerr != nil || rec.State != lifecycle.Paused {
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
	c.log.Info("session run started", "session", sess.id, "run", r.Number())
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
		c.forward(c.withSession(sess, m).WithID(front))
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
	}
}

// forwardWithSession writes a message of a run to the client with the
// blaise session id in its params: of a line as the run's output was read,
// only the id is copied.
func (c *conn) forwardWithSession(sess *session, m *acp.Message) {
	start, end, ok := stringToReplace(m.Params, "sessionId", sess.id)
	if !ok {
		c.forward(m)
		return
	}
	if sess.quotedID == nil {
		sess.quotedID = quote(sess.id)
	}
	c.wrote(c.out.WriteReplacing(m, m.Params[start:end], sess.quotedID, true))
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
func (c *conn) withSession(sess *session, m *acp.Message) *acp.Message {
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

// stepAnswered goes on with the run's preparation.
func (c *conn) stepAnswered(sess *session, m *acp.Message) {
	if m.Error != nil {
		c.setupFailed(sess, sess.waitFor, describeError(m.Error))
		return
	}
	if sess.waitFor == "initialize" {
		c.agentInit = m.Result
		c.log.Debug("the agent answered initialize", "session", sess.id, "result", string(m.Result))
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
	rec, err := c.srv.Sessions.Session(sess.id)
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
	case rec.State == lifecycle.Paused:
		var reason lifecycle.Reason
		if rec.Pause != nil {
			reason = rec.Pause.Reason
		}
		c.log.Info("session paused", "session", sess.id, "run", r.Number(), "reason", reason)
	default:
		sess.over = true
		c.log.Info("session over", "session", sess.id, "state", rec.State, "reason", rec.EndReason)
	}
	if sess.acpID == "" || broke {
		// A session that never opened ends: nobody can load it. What
		// waited for the run learns why it could not start.
		if sess.acpID == "" && !sess.over && err == nil {
			sess.ending = true
			c.active++
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

// shutdown begins the end of the connection: the client is gone. The
// requests it sent are still answered (a client that only closed its
// input reads the answers); the requests of the agents that it can no
// longer answer are answered for it: permission requests as cancelled, the
// others with an error. Each session stops as idle (L9) once nothing of
// the client's is left in it (settle).
func (c *conn) shutdown(why string) {
	c.closing, c.gone = true, why
	for key, fr := range c.frontReqs {
		delete(c.frontReqs, key)
		delete(fr.sess.agentReq, acp.IDKey(fr.agentID))
		if fr.sess.run == fr.run {
			c.answerForClient(fr.run, fr.agentID, fr.method)
		}
	}
	c.settle()
}

// forceStop stops every run now, whatever it is doing.
func (c *conn) forceStop() {
	c.force = true
	c.settle()
}

// settle stops the runs with nothing of the client's left in them, or all
// runs when forced.
func (c *conn) settle() {
	if c.broken {
		c.force = true
	}
	for _, sess := range c.allSessions() {
		if sess.run == nil || sess.phase == draining {
			continue
		}
		if c.force || (sess.phase == ready && len(sess.pending) == 0 && len(sess.queue) == 0) {
			if c.force {
				c.failQueue(sess, acp.InternalError, "Internal error", c.gone)
			}
			sess.phase = draining
			c.stopRun(sess)
		}
	}
}

// answerForClient answers an agent's request that the client cannot
// answer any more (c.gone says why).
func (c *conn) answerForClient(r Run, id []byte, method string) {
	var raw []byte
	if method == "session/request_permission" {
		raw = acp.NewResponse(id, []byte(`{"outcome":{"outcome":"cancelled"}}`))
	} else {
		raw = acp.NewErrorResponse(id, acp.RequestCancelled, "Request cancelled", []byte(`{"reason":`+string(quote(c.gone))+`}`))
	}
	m, err := acp.Parse(raw)
	if err == nil {
		err = r.Send(m)
	}
	if err != nil {
		c.log.Debug("answering for the client", "err", err)
	}
}

func (c *conn) allSessions() []*session {
	all := make([]*session, 0, len(c.sessions)+len(c.opening))
	for _, s := range c.sessions {
		all = append(all, s)
	}
	return append(all, c.opening...)
}
