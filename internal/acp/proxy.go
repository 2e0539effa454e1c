package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// Forward is the innermost step of a pipeline: it sends m on, and for a
// request waits for the answer and returns it; for a notification it
// returns nil.
type Forward func(m *Message) *Message

// Pipeline passes messages through the plugs. Handle returns, for a
// request, the response to send back (and the name of the plug that
// answered it, when a plug did); err fails the session. A plug may keep a
// message past its handler (a notification held back in ctx.state): free
// tells that none can have kept m, which the proxy then releases once it
// is done with it. A message kept is never released: its block is left to
// the garbage collector.
type Pipeline interface {
	Handle(side Side, m *Message, forward Forward) (resp *Message, answeredBy string, free bool, err error)
}

// Proxy forwards ACP between a client and an agent: every message, known or
// not, through one mechanism (M1). Messages of typed methods go through the
// Pipeline (M2). Within each direction messages keep their order, and a
// request waiting for its answer holds up nothing (M6).
type Proxy struct {
	FromClient *Reader
	ToClient   *Writer
	FromAgent  *Reader
	ToAgent    *Writer

	Pipeline Pipeline // nil: every message passes unchanged
	// Extensions sends extension methods ("_…") through the Pipeline too,
	// untyped: a plug asked for them (plug(extensions = True)).
	Extensions bool
	Recorder   Recorder // nil: nothing is recorded
	// Carrier, when set, takes the messages toward the client instead of
	// ToClient: their records carry them (it is then the Recorder's too).
	Carrier *Carrier
	// ClientSession, when set, is the session id the client knows (a JSON
	// string): the session/update notifications toward the client go out
	// in bundles (Bundle), with this id in their params, for a front end
	// that passes them on as they are. Nil: each message goes as it is.
	ClientSession []byte
	Log           *log.Logger // nil: log.Default()
	// CheckParams checks typed params against the SDK types (M2).
	CheckParams bool
	// OnFailure is called when the pipeline fails; the session should end.
	// By then the stream toward the client is cut: nothing else reaches
	// the client. Its requests not answered yet are answered with the
	// failure (FailedMessage) once OnFailure returns; it must not write
	// toward the client.
	OnFailure func(error)
	// OnAgentEnd, when set, is called when the agent's output ends, before
	// the requests left unanswered get their errors: whoever hears of
	// those errors hears of it after.
	OnAgentEnd func()

	checks chan checkItem // typed messages waiting for CheckParams
	// checkBytes is the size of the params in checks.
	checkBytes atomic.Int64
	// drained tells, by the side its messages go toward, whether a Reader
	// had nothing more buffered when it returned its last message: what is
	// sent that way can then be written at once rather than batched.
	drained [2]atomic.Bool
	mu      sync.Mutex
	closed  atomic.Bool // Run has ended; set with mu held
	// ended is closed with closed set: a reader waiting for a handler to
	// take its request goes back to its stream, to end.
	ended   chan struct{}
	pending [2]map[string]*call // by Side of the request, then IDKey
	loading map[string]int      // sessions being loaded, whose replay is not recorded
	// nLoading is len(loading), read without mu by the stream's goroutine.
	nLoading atomic.Int32
	// forwardNotification is the Forward of a notification going toward a
	// side: made once, rather than a closure for each message.
	forwardNotification [2]Forward
	// open are the ids of the client's requests not answered yet, in the
	// order they came; with mu held.
	open [][]byte
	// cut is held for reading while a message goes toward the client, and
	// for writing while a plug's failure cuts that stream (fail): what the
	// client gets after the failure's answers, it gets from nothing else.
	cut sync.RWMutex
	// failure is the error answer's message once a plug failed, set with
	// cut held; failed tells it without the lock.
	failure string
	failed  atomic.Bool
}

// call is a request forwarded and not answered yet.
type call struct {
	id        []byte
	resp      chan *Message
	finished  <-chan struct{} // the request's chain is done
	loadingID string          // session of a session/load
}

// chainRun tracks one message's way through the pipeline: it yields when
// the message was forwarded (a request then waits elsewhere) or handled.
type chainRun struct {
	once     sync.Once
	yielded  chan struct{}
	finished chan struct{}
}

func newChainRun() *chainRun {
	return &chainRun{yielded: make(chan struct{}), finished: make(chan struct{})}
}

func (c *chainRun) yield() { c.once.Do(func() { close(c.yielded) }) }

func (c *chainRun) finish() {
	c.yield()
	close(c.finished)
}

// sender names who sends the messages going toward s.
func (s Side) sender() string {
	if s == ToAgent {
		return "client"
	}
	return "agent"
}

func (s Side) other() Side {
	if s == ToAgent {
		return ToClient
	}
	return ToAgent
}

// Run forwards messages until the agent's output ends or ctx is done. It
// then answers the requests still waiting with errors, so no one waits for
// an agent that is gone.
func (p *Proxy) Run(ctx context.Context) error {
	p.init()
	if p.CheckParams {
		p.checks = make(chan checkItem, checkQueue)
		checked := make(chan struct{})
		// Run waits for it (checked), once it has closed p.checks.
		go func() {
			defer close(checked)
			p.checker(p.checks)
		}()
		defer func() { <-checked }()
	}
	// Each side's messages are read and handled on a goroutine of its own,
	// in order (M6); the run lasts as long as the agent's output.
	agentDone := make(chan error, 1)
	// Waited for, unless ctx ends first: it then ends with the agent's
	// output, as the caller stops the agent.
	go func() { agentDone <- p.read(ToClient, p.FromAgent) }()
	clientDone := make(chan struct{})
	// Waited for as Run ends, where the stream can be interrupted (below).
	go func() {
		defer close(clientDone)
		err := p.read(ToAgent, p.FromClient)
		p.Log.Debug("the client's stream ended", "err", err)
	}()
	var err error
	select {
	case err = <-agentDone:
		if p.OnAgentEnd != nil {
			p.OnAgentEnd()
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	// From here on, what still arrives is dropped: the run is over.
	p.mu.Lock()
	p.closed.Store(true)
	close(p.ended)
	if p.checks != nil {
		close(p.checks)
	}
	p.mu.Unlock()
	p.abandon()
	// The client's reader is waited for where its stream can be
	// interrupted (a pipe or socket the runtime polls); else it reads
	// until the stream's owner closes it (a process's stdin: at exit).
	if resume := p.FromClient.interrupt(); resume != nil {
		<-clientDone
		resume()
	}
	// Everything for the client goes out before the run ends: the
	// answers of a plug's failure too, which the run, stopped by
	// OnFailure, may have ended before.
	p.cut.Lock()
	p.cut.Unlock()
	flush := p.ToClient.Flush
	if p.Carrier != nil {
		flush = p.Carrier.Flush
	}
	if ferr := flush(); ferr != nil {
		p.Log.Debug("the client stream failed", "err", ferr)
	}
	return err
}

// init prepares the state of a run.
func (p *Proxy) init() {
	if p.Log == nil {
		p.Log = log.Default()
	}
	p.pending = [2]map[string]*call{{}, {}}
	p.ended = make(chan struct{})
	p.loading = map[string]int{}
	for _, side := range []Side{ToAgent, ToClient} {
		p.forwardNotification[side] = func(out *Message) *Message { return p.forward(side, out, nil) }
	}
}

// read reads the messages going toward side until r ends; it returns nil
// at the end of the stream. It reads the stream itself, so that a message
// that comes alone is handled by the goroutine that read it; while the
// plugs see a message, the lines read with it are framed and checked on
// another goroutine (ahead), which reads what the stream holds meanwhile.
func (p *Proxy) read(side Side, r *Reader) error {
	a := newAhead(r, p.Pipeline != nil && r.now != nil)
	go a.run(p.Log, side) // stop waits for it
	defer a.stop()
	for {
		m, drained, err := a.next()
		if err != nil {
			// Declared here, where errors.As makes it escape: not once
			// per message.
			var lineErr *LineError
			switch {
			case errors.As(err, &lineErr):
				p.Log.Warn("skipped a bad line", "from", side.sender(), "err", lineErr) // M7
				continue
			case errors.Is(err, io.EOF):
				return nil
			}
			return err
		}
		// Written at once when nothing more has arrived (Pace).
		p.drained[side].Store(drained)
		p.receive(side, m)
	}
}

// receive handles a message that arrived going toward side, in order: it
// returns once the message was forwarded or handled.
func (p *Proxy) receive(side Side, m *Message) {
	if p.closed.Load() {
		p.Log.Debug("dropped a message that arrived after the run ended", "method", m.Method, "toward", side)
		m.Release()
		return
	}
	if p.failed.Load() {
		// The run failed: the client's requests get the failure, and the
		// rest, from either side, goes nowhere.
		if side == ToAgent && m.Kind == Request {
			p.answerFailed(m.ID)
		}
		p.Log.Debug("dropped a message that arrived after a plug failed", "method", m.Method, "toward", side)
		m.Release()
		return
	}
	if m.Kind == Response {
		p.answer(side, m)
		return
	}
	if m.Kind == Notification {
		// A notification never waits for an answer: handled in line.
		p.handle(side, m, nil)
		return
	}
	if side == ToAgent && !p.opened(m.ID) {
		m.Release()
		return
	}
	c := newChainRun()
	// Ends when the pipeline is done with m: a plug may hold it past Run.
	go p.handle(side, m, c)
	select {
	case <-c.yielded:
	case <-p.ended:
	}
}

// opened notes a request of the client as open until its answer goes out;
// false when a plug failed meanwhile, and the request got the failure.
func (p *Proxy) opened(id []byte) bool {
	p.mu.Lock()
	if !p.failed.Load() {
		p.open = append(p.open, bytes.Clone(id))
		p.mu.Unlock()
		return true
	}
	p.mu.Unlock()
	p.answerFailed(id)
	return false
}

// reply sends the answer to a request of the client, unless a plug's
// failure answered it already.
func (p *Proxy) reply(m *Message, by string) {
	p.cut.RLock()
	defer p.cut.RUnlock()
	if p.failed.Load() {
		p.Log.Debug("dropped an answer to the client after a plug failed", "id", string(m.ID))
		return
	}
	p.mu.Lock()
	if i := slices.IndexFunc(p.open, func(id []byte) bool { return bytes.Equal(id, m.ID) }); i >= 0 {
		p.open = slices.Delete(p.open, i, i+1)
	}
	p.mu.Unlock()
	p.write(ToClient, m, by)
}

// FailedMessage is the error message of the answers a proxy gives the
// client's open requests when a plug fails the run: err is the plug's
// failure, with its place and the plug's name.
func FailedMessage(err error) string { return "a plug failed: " + err.Error() }

// fail cuts the stream toward the client at a plug's failure: the
// client's open requests are answered with it, once, and from then on
// nothing else goes that way (M4). OnFailure hears of it before those
// answers go out: a client that stops the run on its answer would
// otherwise stop it first, and the failure would not be the run's.
func (p *Proxy) fail(err error) {
	p.cut.Lock()
	defer p.cut.Unlock()
	var open [][]byte
	if !p.failed.Load() {
		p.failure = FailedMessage(err)
		p.mu.Lock()
		p.failed.Store(true)
		open = p.open
		p.open = nil
		p.mu.Unlock()
	}
	if p.OnFailure != nil {
		p.OnFailure(err)
	}
	for _, id := range open {
		p.write(ToClient, p.failedAnswer(id), "")
	}
}

// failedAnswer is the answer to request id once a plug failed, with cut
// held or p.failed set.
func (p *Proxy) failedAnswer(id []byte) *Message {
	return mustParse(NewErrorResponse(id, InternalError, p.failure, nil))
}

// answerFailed answers a request of the client that came after a plug
// failed.
func (p *Proxy) answerFailed(id []byte) {
	p.cut.RLock()
	defer p.cut.RUnlock()
	p.write(ToClient, p.failedAnswer(id), "")
}

// answer delivers a response going toward side to the request it answers,
// which went the other way, and waits until that request's chain is done.
func (p *Proxy) answer(side Side, m *Message) {
	reqSide := side.other()
	key := IDKey(m.ID)
	p.mu.Lock()
	c, ok := p.pending[reqSide][key]
	delete(p.pending[reqSide], key)
	if ok && c.loadingID != "" {
		p.countLoading(c.loadingID, -1)
	}
	p.mu.Unlock()
	if !ok {
		p.Log.Warn("dropped a response to an unknown request", "id", string(m.ID), "toward", side) // M7
		m.Release()
		return
	}
	c.resp <- m
	<-c.finished
}

// handle passes m through the pipeline, then sends the answer of a request
// back where it came from.
func (p *Proxy) handle(side Side, m *Message, c *chainRun) {
	if c != nil {
		defer c.finish()
	}
	forward := p.forwardNotification[side]
	if c != nil {
		forward = func(out *Message) *Message { return p.forward(side, out, c) }
	}
	var resp *Message
	var by string
	if p.Pipeline != nil && p.seen(side, m) {
		var err error
		var free bool
		resp, by, free, err = p.Pipeline.Handle(side, m, forward)
		if free {
			defer m.Release()
		}
		if err != nil {
			p.Log.Error("a plug failed on a message", "method", m.Method, "err", err)
			p.fail(err)
			if m.Kind == Request {
				// For the client, dropped: the failure answered it.
				resp = p.failedAnswer(m.ID)
			}
		}
	} else {
		// No plug saw m or its answer, so no one kept them: once sent,
		// their buffers may be reused.
		defer m.Release()
		resp = forward(m)
		if resp != nil {
			defer resp.Release()
		}
	}
	switch {
	case m.Kind != Request || resp == nil:
	case side == ToAgent:
		p.reply(resp, by)
	default:
		p.send(ToAgent, resp, by)
	}
}

// seen reports whether m goes through the Pipeline: a typed message,
// queued for CheckParams, or an extension one that a plug asked for.
func (p *Proxy) seen(side Side, m *Message) bool {
	if Typed(m.Method, side) {
		p.check(m)
		return true
	}
	return p.Extensions && IsExtension(m.Method)
}

// checkQueue and maxCheckBytes bound the messages waiting to be checked,
// and the size of their params (a message larger than that is queued
// alone); when they are reached, messages pass unchecked rather than slow
// the stream down.
const (
	checkQueue    = 256
	maxCheckBytes = 1 << 20
)

// A checkItem is a typed message queued for CheckParams: its method (a
// string of its own) and a copy of its params. A queued message is checked
// long after it went on (the queue stays full while a stream is checked),
// and its block would be kept for as long, or read again meanwhile once
// released.
type checkItem struct {
	method string
	params []byte
}

// check queues m for CheckParams. A misfit changes nothing about how m is
// forwarded (M2), so checking runs beside the stream, not in it.
func (p *Proxy) check(m *Message) {
	if len(p.checks) == cap(p.checks) {
		return // full, as it stays while a stream is checked: no lock taken
	}
	if queued := p.checkBytes.Load(); queued > 0 && queued+int64(len(m.Params)) > maxCheckBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.checks == nil || p.closed.Load() {
		return
	}
	item := checkItem{m.Method, bytes.Clone(m.Params)}
	select {
	case p.checks <- item:
		p.checkBytes.Add(int64(len(item.params)))
	default:
	}
}

// checker checks queued messages, resting after each check nine times as
// long as it took, so that checking takes at most a tenth of a core however
// busy the stream is.
// Once the run has ended (p.ended), what is left is checked without rest.
func (p *Proxy) checker(ch <-chan checkItem) {
	rest := time.NewTimer(0)
	defer rest.Stop()
	for c := range ch {
		t0 := time.Now()
		p.checkBytes.Add(-int64(len(c.params)))
		if err := CheckParams(c.method, c.params); err != nil {
			p.Log.Warn("protocol: params do not fit the ACP schema; passing them as they came", "err", err)
		}
		rest.Reset(9 * time.Since(t0))
		select {
		case <-rest.C:
		case <-p.ended:
		}
	}
}

// forward sends m toward side; for a request it waits for the answer.
func (p *Proxy) forward(side Side, m *Message, c *chainRun) *Message {
	var pending *call
	if m.Kind == Request && c != nil {
		// The id is copied, so that the pending table does not depend on
		// m's block.
		pending = &call{id: bytes.Clone(m.ID), resp: make(chan *Message, 1), finished: c.finished}
		key := IDKey(m.ID)
		p.mu.Lock()
		if p.closed.Load() {
			p.mu.Unlock()
			// As for a request the agent left unanswered: its client
			// tells that the run ended on its own.
			p.Log.Debug("a request arrived after the agent stopped", "id", string(m.ID))
			return mustParse(NewErrorResponse(m.ID, InternalError, AgentStoppedMessage, nil))
		}
		if _, dup := p.pending[side][key]; dup {
			p.mu.Unlock()
			// An id still waiting for its answer cannot be told apart from
			// its twin: the newcomer is refused, not forwarded (M7).
			p.Log.Warn("refused a request", "id", string(m.ID), "because", "the id of a request still waiting for its answer")
			return mustParse(NewErrorResponse(m.ID, InvalidRequest, "request refused: the id of a request still waiting for its answer", nil))
		}
		if m.Method == "session/load" {
			if id := sessionID(m.Params); id != "" {
				pending.loadingID = id
				p.countLoading(id, 1)
			}
		}
		p.pending[side][key] = pending
		p.mu.Unlock()
	}
	p.send(side, m, "")
	if pending == nil {
		return nil
	}
	c.yield()
	return <-pending.resp
}

// send writes m toward side and records it where it leaves the chain (M5);
// toward the client, only until a plug's failure cuts that stream.
func (p *Proxy) send(side Side, m *Message, by string) {
	if side == ToClient {
		p.cut.RLock()
		defer p.cut.RUnlock()
		if p.failed.Load() {
			p.Log.Debug("dropped a message toward the client after a plug failed", "method", m.Method)
			return
		}
	}
	p.write(side, m, by)
}

// write writes m toward side and records it.
func (p *Proxy) write(side Side, m *Message, by string) {
	w := p.ToAgent
	if side == ToClient {
		w = p.ToClient
	}
	// Recorded first: the message has left the chain. A peer that sees it
	// finds it in a local transcript; a server's commits it a moment later
	// (docs/server.md, Transcripts).
	recorded := p.Recorder != nil && !p.replayed(side, m)
	if recorded {
		p.Recorder.Record(side, m, by)
	}
	// When the next messages are read already, this one goes with them.
	pace := Now
	if !p.drained[side].Load() {
		pace = WithNext
	}
	var err error
	switch {
	case side == ToClient && p.Carrier != nil:
		err = p.Carrier.Carry(m, recorded, pace)
	case side == ToClient && p.ClientSession != nil && m.Kind == Notification && m.Method == "session/update":
		id := m.SessionID()
		if string(id) == string(p.ClientSession) {
			id = nil
		}
		err = w.WriteBundled(m, id, p.ClientSession, pace)
	default:
		err = w.WriteMessage(m, pace)
	}
	if err != nil {
		p.Log.Debug("a message could not be delivered", "toward", side, "err", err)
	}
}

// countLoading counts d more session/loads of session id under way, with
// p.mu held.
func (p *Proxy) countLoading(id string, d int) {
	if p.loading[id] += d; p.loading[id] <= 0 {
		delete(p.loading, id)
	}
	p.nLoading.Store(int32(len(p.loading)))
}

// replayed reports whether m is history that an agent replays while it
// loads a session: shown to plugs, but recorded only the first time (M5).
func (p *Proxy) replayed(side Side, m *Message) bool {
	if side != ToClient || m.Kind != Notification || m.Method != "session/update" {
		return false
	}
	if p.nLoading.Load() == 0 {
		return false
	}
	id := sessionID(m.Params)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loading[id] > 0
}

// AgentStoppedMessage is the error message of the requests a proxy answers
// itself because the agent stopped before it answered them.
const AgentStoppedMessage = "the agent stopped before answering"

// abandon answers every request still waiting with an error.
func (p *Proxy) abandon() {
	p.mu.Lock()
	var waiting []*call
	for side := range p.pending {
		for key, c := range p.pending[side] {
			waiting = append(waiting, c)
			delete(p.pending[side], key)
		}
	}
	p.mu.Unlock()
	for _, c := range waiting {
		c.resp <- mustParse(NewErrorResponse(c.id, InternalError, AgentStoppedMessage, nil))
		<-c.finished
	}
}

// sessionID reads params.sessionId.
func sessionID(params []byte) string {
	var v struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &v)
	return v.SessionID
}

func mustParse(raw []byte) *Message {
	m, err := Parse(raw)
	if err != nil {
		panic("acp: built an invalid message: " + err.Error())
	}
	return m
}
