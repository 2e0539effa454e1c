// Package acpfront presents a blaise-agent chain as an ACP agent to one
// client on one connection (`blaise-agent acp`, docs/editors.md): the client sees
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
// Lifecycle. No session starts before the client asks for one:
// initialize is answered by the front end (advertise), with the agent's
// answer kept from an earlier connection or asked of the agent alone
// (Capabilities), session/list from the store, and authenticate is kept
// for the runs. session/new starts a
// session; each run gets the client's initialize (and authenticate) first,
// their answers swallowed, and a handshake the agent refuses fails the
// session/new with the agent's error. The engine stops a run that was
// inactive too long (L1); the session pauses and the front end keeps it, so
// the next message to it starts a resume run transparently: initialize
// again, session/load of the agent's session (its replayed history
// swallowed), then the message. A session/load from the client of a paused
// session resumes it too, and the client sees the replay. A session whose
// run no front end holds (a server took it back after a restart) goes on
// in that run with the client that loads it or sends it a message. When
// the client disconnects, what it asked is still answered, the agents'
// requests it can no longer answer are answered for it, and every session
// stops as idle under its idle policy (L9); the front end returns once the
// runs have ended.
//
// Failures. A run that ends (a crash, a stop) with client requests in flight
// answers them with an error that says why (the run's failure as recorded);
// the session pauses or ends as the engine records it, and the other
// sessions go on. A session whose first run ends before it opened is ended.
package front

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
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
	// Capabilities, when set, keeps the chain's answer to initialize
	// between connections, and learns it from the agent when none is kept;
	// nil: the answer is read from the transcripts of the configuration's
	// newest sessions.
	Capabilities Capabilities
	// Settled, when set, is closed once the sessions of earlier front
	// ends are settled (the engine's first sweep), which Settle starts:
	// the client's messages but initialize, session/new and those of the
	// sessions it holds wait for it, so that a session whose run died is
	// found paused, as it is. Settle
	// is called once: at the first message that waits, once the agent has
	// answered the first session/new (its start does not share the
	// machine with the settling), or a second after the server started.
	Settled <-chan struct{}
	Settle  func()

	settleOnce sync.Once
}

// startSettling starts the settling of earlier sessions (Settle), once.
func (s *Server) startSettling() {
	if s.Settle != nil {
		s.settleOnce.Do(s.Settle)
	}
}

// settleAfter is when a server whose client has not asked for sessions
// settles the earlier ones all the same.
const settleAfter = time.Second

// Capabilities keeps the chain's answer to initialize (agentcaps.Cache).
type Capabilities interface {
	// Known returns the answer kept, nil when none; tried tells that the
	// agent could not be asked, so that it is not asked again.
	Known() (result []byte, tried bool)
	// Learn asks the agent alone, with the client's initialize params,
	// keeps its answer and gives it to answered, then stops the agent; it
	// returns once the agent has stopped, with why there is no answer.
	Learn(ctx context.Context, clientParams []byte, answered func(result []byte)) error
	// Keep keeps the chain's answer to a session's initialize.
	Keep(result []byte) error
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a Learn still under way
	c := &conn{
		ctx:          ctx,
		srv:          s,
		log:          logger,
		clientWriter: clientWriter{log: logger, out: acp.NewWriter(s.Out), pace: acp.Behind},
		events:       make(chan event, 64),
		quit:         make(chan struct{}),
		sessionTable: sessionTable{sessions: map[string]*session{}},
		frontReqs:    map[string]frontReq{},
	}
	defer close(c.quit)
	defer time.AfterFunc(settleAfter, s.startSettling).Stop()
	client := acp.ReadMessages(acp.NewReader(s.In, s.MaxLine), logger, nil)
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
	dir      string // where its first run starts: the cwd of its session/new
	run      Run
	holder   *holder // this client, in holders while run runs
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
	learned    // the agent's answer to initialize
	learnEnded // the agent asked alone has stopped; why there is no answer
)

type event struct {
	kind eventKind
	sess *session
	run  Run
	msgs []*acp.Message // of runMessages, in the order the run sent them
	init []byte         // of learned
	err  error
}

// conn is the state of the connection; only Run's goroutine touches it.
type conn struct {
	ctx context.Context // ends when Run returns
	srv *Server
	log *log.Logger
	clientWriter
	events chan event
	quit   chan struct{}

	sessionTable
	greeting

	frontReqs map[string]frontReq // by IDKey of the front id
	nextFront int64
	nextOwn   int64

	active  int    // runs launching or running, and Ends in progress
	closing bool   // the client is gone, or the front end is stopping
	gone    string // why, for the requests that will not be answered
	// force: stop every run now, answered or not (the client's output is
	// broken, or the shutdown took too long).
	force bool
}

// clientWriter writes to the client: the front end's own answers and the
// messages of the sessions' runs.
type clientWriter struct {
	log *log.Logger
	out *acp.Writer
	// pace of what is written to the client: Behind, so that the
	// connection never waits on the client; WithNext within a batch of a
	// run's messages.
	pace   acp.Pace
	broken bool // writing to the client failed
}

// sessionTable is the sessions of the connection.
type sessionTable struct {
	sessions map[string]*session // by blaise id
	opening  []*session          // sessions whose first run is launching
	last     *session            // the session the client addressed last
}

// greeting is what the client and the agent said at initialize and
// authenticate, which the handshake of every run repeats.
type greeting struct {
	initParams []byte   // the client's initialize params, once answered
	told       []byte   // the initialize result the client got; nil while it is learned
	initIDs    [][]byte // the initialize requests waiting for it
	agentInit  []byte   // the agent's last initialize result known, nil if none
	authParams []byte   // the client's last authenticate
}

func (c *conn) post(ev event) {
	select {
	case c.events <- ev:
	case <-c.quit:
	}
}

func (c *conn) handle(ev event) {
	switch ev.kind {
	case launched:
		c.launched(ev.sess, ev.run, ev.err)
	case runMessages:
		// The messages of a batch but its last wait for it, and go to the
		// client in one write.
		for i, m := range ev.msgs {
			if i < len(ev.msgs)-1 {
				c.pace = acp.WithNext
			}
			c.fromRun(ev.sess, ev.run, m)
			c.pace = acp.Behind
		}
	case runDone:
		c.runEnded(ev.sess, ev.run)
	case learned:
		c.answerInit(ev.init)
	case learnEnded:
		c.active--
		if ev.err != nil {
			c.log.Warn("asking the agent for its capabilities failed; initialize is answered without them", "err", ev.err)
		}
		if c.told == nil {
			c.answerInit(nil)
		}
	case ended:
		c.active--
		ev.sess.ending = false
		ev.sess.over = true
		if ev.err != nil {
			c.log.Warn("ending an unused session failed", "session", ev.sess.id, "err", ev.err)
		}
	}
}

func (t *sessionTable) allSessions() []*session {
	all := make([]*session, 0, len(t.sessions)+len(t.opening))
	for _, s := range t.sessions {
		all = append(all, s)
	}
	return append(all, t.opening...)
}
