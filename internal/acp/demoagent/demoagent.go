// Package demoagent is a small deterministic ACP agent: no model, no network.
//
// It speaks the Agent Client Protocol over a pair of streams (normally the
// process's stdin and stdout) through acp-go-sdk's agent side, and its
// behaviour is driven entirely by the prompt text through a tiny "prompt
// language": every line of a text block is either a command ("/think ...",
// "/tool ...", "/permission", "/slow 50", ...) or echoed back as
// "echo: <line>". See docs/demo-agent.md for the language.
//
// It serves the project's quick start (a peer that needs no API key) and the
// tests of the ACP proxy: every ACP feature a proxy has to forward (streamed
// updates, agent→client requests, cancellation, session/load replay, large
// lines, extension notifications, errors, crashes) can be triggered on demand.
//
// Sessions are stored as JSON files in Options.StateDir after every turn, so a
// later process using the same directory can session/load them.
package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultName is the agent name reported in initialize when Options.Name is empty.
const DefaultName = "blaise-demo-agent"

// Version is the agent version reported in initialize (agentInfo.version).
const Version = "0.1.0"

// cancelGrace is how long requests to the client (e.g. a pending
// session/request_permission) may still run after the turn was cancelled,
// waiting for the client's answer (ACP: the client answers them "cancelled").
const cancelGrace = 5 * time.Second

// Options configures Run.
type Options struct {
	// StateDir is where sessions are stored (one JSON file per session under
	// StateDir/sessions) so that a later process can session/load them.
	// Empty means DefaultStateDir().
	StateDir string
	// Name is agentInfo.name in the initialize response. Empty means DefaultName.
	Name string
	// Log receives the agent's diagnostics (text lines, slog format). The
	// agent never writes anything but ACP messages to out. Nil discards them.
	Log io.Writer
	// Script, when set, scripts the turns: the n-th session/prompt of this
	// process runs Script[n-1] in the prompt language instead of its own
	// text (the prompt is still stored in the history). Prompts past the
	// end of Script run their own text.
	Script []string
	// Fork advertises sessionCapabilities.fork: session/fork, which the
	// agent serves either way, copies a stored session into a new one.
	Fork bool
}

// ErrExit is returned by Run when a prompt ran "/exit CODE". The prompt gets
// no answer: the agent stops writing to out at once, as if it had crashed.
// The command that wraps Run is expected to exit the process with Code:
//
//	var ee demoagent.ErrExit
//	if errors.As(err, &ee) { os.Exit(ee.Code) }
type ErrExit struct {
	Code int
}

func (e ErrExit) Error() string {
	return fmt.Sprintf("demo agent: exit %d requested by /exit", e.Code)
}

// DefaultStateDir is the StateDir used when Options.StateDir is empty:
// $XDG_STATE_HOME/blaise-demo-agent, or <os.TempDir()>/blaise-demo-agent
// when XDG_STATE_HOME is not set.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "blaise-demo-agent")
	}
	return filepath.Join(os.TempDir(), "blaise-demo-agent")
}

// Run serves ACP as an agent: it reads the client's messages from in and
// writes its own to out, until in reaches EOF (the client hung up), ctx ends,
// or a prompt runs "/exit CODE".
//
// It returns nil after EOF, ctx.Err() when ctx ended, ErrExit after /exit, or
// an error if StateDir cannot be created. Turns still running when Run stops
// are cancelled (their history is stored) and Run waits for them; once Run
// has returned, the agent writes nothing more to out. Run does not close in
// or out.
func Run(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(logw, nil)).With("component", "demo-agent")

	st := &store{dir: opts.StateDir}
	if err := st.init(); err != nil {
		return fmt.Errorf("demo agent: state dir: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	a := &agent{
		name:     opts.Name,
		store:    st,
		log:      logger,
		out:      &gateWriter{w: out},
		runCtx:   runCtx,
		exitCh:   make(chan int, 1),
		sessions: make(map[string]*session),
		script:   opts.Script,
		fork:     opts.Fork,
	}
	// The connection starts reading at once; hold the reads back until a.conn
	// is set so that no handler can run before the agent is complete.
	ready := make(chan struct{})
	conn := acp.NewAgentSideConnection(a, a.out, &startReader{r: in, ready: ready})
	conn.SetLogger(logger.With("component", "acp-conn"))
	a.conn = conn
	// Logged before the reads start, so that it comes before the lines of
	// the handlers (initialize) and the log reads the same every time.
	logger.Info("serving", "name", opts.Name, "stateDir", opts.StateDir)
	close(ready)

	var err error
	select {
	case code := <-a.exitCh:
		err = ErrExit{Code: code}
	case <-conn.Done():
		select {
		case code := <-a.exitCh:
			err = ErrExit{Code: code}
		default:
		}
	case <-ctx.Done():
		err = ctx.Err()
	}

	// Stop: cancel every turn, refuse new work, wait for the handlers that
	// are running, then stop writing.
	stop()
	a.mu.Lock() // barrier: begin() calls either finished before or see runCtx done
	a.mu.Unlock()
	a.inflight.Wait()
	a.out.close()
	logger.Info("stopped", "err", err)
	return err
}

// startReader blocks reads until ready is closed.
type startReader struct {
	r     io.Reader
	ready <-chan struct{}
}

func (s *startReader) Read(p []byte) (int, error) {
	<-s.ready
	return s.r.Read(p)
}

// gateWriter forwards writes to w until closed; later writes are dropped.
type gateWriter struct {
	w      io.Writer
	closed atomic.Bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	if g.closed.Load() {
		return 0, errors.New("demo agent: output closed")
	}
	return g.w.Write(p)
}

func (g *gateWriter) close() { g.closed.Store(true) }

// agent implements acp.Agent and acp.AgentLoader.
type agent struct {
	name   string
	store  *store
	log    *slog.Logger
	out    *gateWriter
	conn   *acp.AgentSideConnection
	runCtx context.Context
	exitCh chan int

	inflight sync.WaitGroup

	mu         sync.Mutex
	clientCaps acp.ClientCapabilities
	sessions   map[string]*session
	script     []string // turns still to run in place of prompts
	fork       bool     // advertise session/fork
}

// scripted returns what the next prompt runs: the next turn of the script,
// or blocks when the script has none left.
func (a *agent) scripted(blocks []acp.ContentBlock) []acp.ContentBlock {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.script) == 0 {
		return blocks
	}
	text := a.script[0]
	a.script = a.script[1:]
	return []acp.ContentBlock{acp.TextBlock(text)}
}

// session is a session known to this connection (created, loaded or resumed).
type session struct {
	id string

	// turnMu is held by a running turn or a load replay; it serialises the
	// turns of the session and guards file.
	turnMu sync.Mutex
	file   *sessionFile

	mu     sync.Mutex
	cancel context.CancelFunc // of the running turn; guarded by mu
}

var (
	_ acp.Agent                  = (*agent)(nil)
	_ acp.AgentLoader            = (*agent)(nil)
	_ acp.ExtensionMethodHandler = (*agent)(nil)
)

// begin registers a running handler, so that Run waits for it.
func (a *agent) begin() (func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runCtx.Err() != nil {
		return nil, acp.NewInternalError(map[string]any{"error": "demo agent is shutting down"})
	}
	a.inflight.Add(1)
	return a.inflight.Done, nil
}

func (a *agent) caps() acp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clientCaps
}

func (a *agent) lookup(id acp.SessionId) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[string(id)]
}

// open returns the session from memory, or loads it from the state dir.
func (a *agent) open(id acp.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[string(id)]; s != nil {
		return s, nil
	}
	sf, err := a.store.load(string(id))
	if errors.Is(err, errSessionNotFound) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	s := &session{id: string(id), file: sf}
	a.sessions[s.id] = s
	return s, nil
}

// sessionNotFound is ACP's "Resource not found" error (-32002); acp-go-sdk
// has no constructor for it.
func sessionNotFound(id acp.SessionId) error {
	return &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"sessionId": string(id)}}
}

func (a *agent) save(s *session) {
	if err := a.store.save(s.file); err != nil {
		a.log.Error("saving session failed", "session", s.id, "err", err)
	}
}

// Initialize implements acp.Agent.
func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	a.log.Info("initialize", "clientProtocolVersion", int(p.ProtocolVersion))
	sessionCaps := acp.SessionCapabilities{
		List:   &acp.SessionListCapabilities{},
		Resume: &acp.SessionResumeCapabilities{},
		Close:  &acp.SessionCloseCapabilities{},
	}
	if a.fork {
		sessionCaps.Fork = &acp.SessionForkCapabilities{}
	}
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: true,
			PromptCapabilities: acp.PromptCapabilities{
				Image:           true,
				Audio:           true,
				EmbeddedContext: true,
			},
			SessionCapabilities: sessionCaps,
		},
		AgentInfo: &acp.Implementation{
			Name:    a.name,
			Title:   acp.Ptr("Blaise demo agent"),
			Version: Version,
		},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

// Authenticate implements acp.Agent. The agent offers no auth methods.
func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return acp.NewInvalidParams(map[string]any{"error": "cwd must be an absolute path", "cwd": cwd})
	}
	return nil
}

// NewSession implements acp.Agent.
func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	done, err := a.begin()
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	defer done()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.NewSessionResponse{}, err
	}
	sf, err := a.store.create(p.Cwd)
	if err != nil {
		return acp.NewSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	s := &session{id: sf.SessionID, file: sf}
	a.mu.Lock()
	a.sessions[s.id] = s
	a.mu.Unlock()
	a.log.Info("session created", "session", s.id, "cwd", p.Cwd)
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.id)}, nil
}

// LoadSession implements acp.AgentLoader: it replays the stored history as
// session/update notifications, then answers.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	done, err := a.begin()
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	defer done()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s, err := a.open(p.SessionId)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	if s.file.Cwd != p.Cwd {
		s.file.Cwd = p.Cwd
		a.save(s)
	}
	for i, raw := range s.file.History {
		var u acp.SessionUpdate
		if err := json.Unmarshal(raw, &u); err != nil {
			return acp.LoadSessionResponse{}, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("history entry %d: %v", i, err)})
		}
		if err := a.conn.SessionUpdate(a.runCtx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	a.log.Info("session loaded", "session", s.id, "replayed", len(s.file.History))
	return acp.LoadSessionResponse{}, nil
}

// ResumeSession implements acp.Agent: like session/load without the replay.
func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	done, err := a.begin()
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	defer done()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	s, err := a.open(p.SessionId)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	if s.file.Cwd != p.Cwd {
		s.file.Cwd = p.Cwd
		a.save(s)
	}
	a.log.Info("session resumed", "session", s.id)
	return acp.ResumeSessionResponse{}, nil
}

// UnstableForkSession serves session/fork: a new session holding a copy of
// the stored one's history and tool call counter, in the request's cwd.
// The forked session stays as it was.
func (a *agent) UnstableForkSession(ctx context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	done, err := a.begin()
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	defer done()
	if err := checkCwd(p.Cwd); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	parent, err := a.open(p.SessionId)
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	parent.turnMu.Lock()
	history, next := slices.Clone(parent.file.History), parent.file.NextToolCall
	parent.turnMu.Unlock()
	sf, err := a.store.create(p.Cwd)
	if err == nil {
		sf.History, sf.NextToolCall = history, next
		err = a.store.save(sf)
	}
	if err != nil {
		return acp.UnstableForkSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	s := &session{id: sf.SessionID, file: sf}
	a.mu.Lock()
	a.sessions[s.id] = s
	a.mu.Unlock()
	a.log.Info("session forked", "session", s.id, "from", parent.id, "cwd", p.Cwd)
	return acp.UnstableForkSessionResponse{SessionId: acp.SessionId(s.id)}, nil
}

// CloseSession implements acp.Agent: cancels the running turn and forgets the
// session in this connection (its file stays, it can be loaded again).
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	s := a.sessions[string(p.SessionId)]
	delete(a.sessions, string(p.SessionId))
	a.mu.Unlock()
	if s == nil {
		return acp.CloseSessionResponse{}, sessionNotFound(p.SessionId)
	}
	s.cancelTurn()
	a.log.Info("session closed", "session", s.id)
	return acp.CloseSessionResponse{}, nil
}

// ListSessions implements acp.Agent: every session stored in the state dir,
// filtered by cwd when given, in one page.
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	ents, err := a.store.list()
	if err != nil {
		return acp.ListSessionsResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	resp := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, e := range ents {
		if p.Cwd != nil && *p.Cwd != e.cwd {
			continue
		}
		resp.Sessions = append(resp.Sessions, acp.SessionInfo{SessionId: acp.SessionId(e.id), Cwd: e.cwd})
	}
	return resp, nil
}

// SetSessionMode implements acp.Agent; the agent has no modes.
func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// SetSessionConfigOption implements acp.Agent; the agent has no config options.
func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

// Cancel implements acp.Agent (session/cancel). The SDK has already cancelled
// the context of the session's running prompt; this also cancels a turn the
// SDK does not know about (one waiting for its predecessor).
// It logs once the turn is cancelled, so that the log says when the
// notification has had its effect.
func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	if s := a.lookup(p.SessionId); s != nil {
		s.cancelTurn()
	}
	a.log.Info("cancel", "session", string(p.SessionId))
	return nil
}

func (s *session) cancelTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

// HandleExtensionMethod implements acp.ExtensionMethodHandler: the request
// "_demo/echo" answers its params unchanged; other extension methods are
// unknown (-32601; unknown extension notifications are ignored).
func (a *agent) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	a.log.Info("extension method", "method", method, "bytes", len(params))
	if method == "_demo/echo" {
		if len(params) == 0 {
			return map[string]any{}, nil
		}
		return params, nil
	}
	return nil, acp.NewMethodNotFound(method)
}

// Prompt implements acp.Agent (session/prompt): runs one turn.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	done, err := a.begin()
	if err != nil {
		return acp.PromptResponse{}, err
	}
	defer done()
	s := a.lookup(p.SessionId)
	if s == nil {
		return acp.PromptResponse{}, sessionNotFound(p.SessionId)
	}
	s.turnMu.Lock()
	defer s.turnMu.Unlock()

	// The turn ends early on session/cancel (the SDK cancels ctx and calls
	// Cancel), on a newer prompt in the same session (the SDK cancels ctx),
	// when the client hangs up (ctx), or when Run stops.
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopRun := context.AfterFunc(a.runCtx, cancel)
	defer stopRun()
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancel = nil
		s.mu.Unlock()
	}()

	// Requests to the client outlive a cancelled turn by cancelGrace, so
	// that the client's answer (e.g. permission outcome "cancelled") is
	// awaited and reported.
	cctx, ccancel := context.WithCancel(a.runCtx)
	defer ccancel()
	var grace atomic.Pointer[time.Timer]
	stopGrace := context.AfterFunc(tctx, func() { grace.Store(time.AfterFunc(cancelGrace, ccancel)) })
	defer func() {
		stopGrace()
		if t := grace.Load(); t != nil {
			t.Stop()
		}
	}()

	t := &turn{updates: updates{a: a, s: s, sid: p.SessionId, ctx: tctx}, cctx: cctx, caps: a.caps()}
	for _, b := range p.Prompt {
		t.record(acp.UpdateUserMessage(b))
	}
	a.log.Info("turn started", "session", s.id, "blocks", len(p.Prompt))
	reason, err := t.run(a.scripted(p.Prompt))

	var ee ErrExit
	if errors.As(err, &ee) {
		// Crash simulation: no answer, no more output, history of this
		// turn not stored.
		a.log.Info("exit requested", "session", s.id, "code", ee.Code)
		a.out.close()
		select {
		case a.exitCh <- ee.Code:
		default:
		}
		return acp.PromptResponse{}, err
	}
	a.save(s)
	if err != nil {
		a.log.Info("turn failed", "session", s.id, "err", err)
		return acp.PromptResponse{}, err
	}
	a.log.Info("turn ended", "session", s.id, "stopReason", string(reason))
	resp := acp.PromptResponse{StopReason: reason}
	if p.MessageId != nil {
		resp.UserMessageId = p.MessageId
	}
	return resp, nil
}
