package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
)

// runners are the runners' connections, and the engine's launcher of runs
// on them.
type runners struct {
	Store   *sqlstore.Store
	Log     *log.Logger
	clock   lifecycle.Clock
	lease   time.Duration  // Server.Lease, or DefaultLease
	engine  *engine.Engine // whose Launcher this is
	metrics *serverMetrics

	mu    sync.Mutex
	conns map[string]map[*runnerConn]bool // by agent
	procs map[runnerproto.RunRef]*remoteProcess
}

func (rs *runners) add(rc *runnerConn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.conns[rc.agent] == nil {
		rs.conns[rc.agent] = map[*runnerConn]bool{}
	}
	rs.conns[rc.agent][rc] = true
}

func (rs *runners) remove(rc *runnerConn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.conns[rc.agent], rc)
}

// register exchanges a registration token for a runner credential.
func (rs *runners) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
		Name  string `json:"name"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	cred, id, err := rs.Store.Register(r.Context(), req.Token, req.Name)
	if errors.Is(err, sqlstore.ErrBadToken) {
		fail(w, http.StatusUnauthorized, "%v", err)
		return
	}
	if err != nil {
		failErr(w, err)
		return
	}
	rs.Log.Info("runner registered", "runner", req.Name, "id", id)
	writeJSON(w, http.StatusOK, map[string]string{"credential": cred, "runner_id": id})
}

// connect takes a runner's connection: WebSocket, then yamux.
func (rs *runners) connect(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	runner, err := rs.Store.RunnerByCredential(ctx, bearer(r))
	if err != nil {
		fail(w, http.StatusUnauthorized, "%v", err)
		return
	}
	agent := r.URL.Query().Get("agent")
	a, err := rs.Store.Agent(ctx, agent)
	if err != nil {
		failErr(w, err)
		return
	}
	version := servedVersion(r)
	if version == 0 {
		offered := strings.Join(r.Header.Values("Sec-WebSocket-Protocol"), ", ")
		if offered == "" {
			offered = "none"
		}
		var served []string
		for _, v := range runnerproto.Served {
			served = append(served, runnerproto.Subprotocol(v))
		}
		fail(w, http.StatusBadRequest, "wrong protocol version: this server speaks %s, the runner offered %s: run a blaise-agent of the server's version on the runner", strings.Join(served, " or "), offered)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{runnerproto.Subprotocol(version)}})
	if err != nil {
		return
	}
	ws.SetReadLimit(-1)
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	mux, err := yamux.Server(runnerproto.Coalesce(nc, nil), runnerproto.YamuxConfig())
	if err != nil {
		nc.Close()
		return
	}
	first, err := mux.AcceptStream()
	if err != nil {
		mux.Close()
		return
	}
	frames := runnerproto.NewConn(first)
	hello, err := frames.Receive()
	if err != nil || hello.Kind != runnerproto.KindHello {
		refuse(mux, first, "the first frame must be hello")
		return
	}
	if hello.Version != version {
		refuse(mux, first, fmt.Sprintf("runner protocol version %d; this connection speaks %d", hello.Version, version))
		return
	}
	rc := &runnerConn{runners: rs, agent: a.Name, name: runner.Name, id: runner.ID, build: hello.Build, config: hello.Config, dir: hello.Dir, actions: hello.Actions, version: version, mux: mux, frames: frames, gone: make(chan struct{}), welcomed: make(chan struct{}), procs: map[runnerproto.RunRef]*remoteProcess{}}
	// The runs the runner still has, the server adopts, those of its
	// connection that broke and those it had before it restarted; the
	// runner stops the others.
	var kept []runnerproto.RunRef
	seen := map[runnerproto.RunRef]bool{}
	for _, ref := range hello.Runs {
		if seen[ref] { // a run named twice is adopted once
			continue
		}
		seen[ref] = true
		if rc.reattach(ref) || rc.takeBack(ctx, ref) {
			kept = append(kept, ref)
		}
	}
	// Runs may go to the runner once it knows it is welcome: it is one of
	// the agent's before, so that a session started when it says it is
	// connected finds it; a launch waits for the welcome (launch).
	rs.add(rc)
	welcome := runnerproto.Frame{Kind: runnerproto.KindWelcome, Settings: &a.Settings, Runs: kept, LeaseMS: rs.lease.Milliseconds()}
	if err := frames.Send(welcome); err != nil {
		// The welcome may still reach the runner (yamux sends a frame
		// whose write timed out): its connection ends as any other does.
		rs.remove(rc)
		mux.Close()
		close(rc.gone)
		rs.Log.Warn("welcoming a runner failed; its connection is closed", "agent", a.Name, "runner", runner.Name, "err", err)
		rc.left(ctx)
		return
	}
	close(rc.welcomed)
	rs.Log.Info("runner connected", "agent", a.Name, "runner", runner.Name)
	rs.engine.Wake() // teardowns that waited for a runner
	rc.serve(ctx)
}

// refuse answers a runner's hello with why it is refused, and closes the
// connection once the runner has read it (it closes its side), or after a
// moment: yamux does not send what is queued when its session closes.
func refuse(mux *yamux.Session, first *yamux.Stream, why string) {
	defer mux.Close()
	if err := runnerproto.NewConn(first).Send(runnerproto.Frame{Kind: runnerproto.KindWelcome, Error: why}); err != nil {
		return
	}
	first.Close()
	_ = first.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.Copy(io.Discard, first)
}

func offers(r *http.Request, proto string) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if strings.TrimSpace(p) == proto {
				return true
			}
		}
	}
	return false
}

// servedVersion is the newest runner protocol version that both the
// server serves and the runner offers; 0 for none.
func servedVersion(r *http.Request) int {
	for _, v := range runnerproto.Served {
		if offers(r, runnerproto.Subprotocol(v)) {
			return v
		}
	}
	return 0
}

// Disconnect ends the connections of the runner with the id (revoked).
func (rs *runners) Disconnect(id string) {
	rs.mu.Lock()
	var cut []*runnerConn
	for _, conns := range rs.conns {
		for rc := range conns {
			if rc.id == id {
				cut = append(cut, rc)
			}
		}
	}
	rs.mu.Unlock()
	for _, rc := range cut {
		rc.mux.Close()
	}
}

// LiveRunners are the connected runners, by name, for the dashboard.
func (rs *runners) LiveRunners() map[string]dashboard.LiveRunner {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := map[string]dashboard.LiveRunner{}
	for agent, conns := range rs.conns {
		for rc := range conns {
			rc.mu.Lock()
			out[rc.name] = dashboard.LiveRunner{Agent: agent, Version: rc.build, Runs: out[rc.name].Runs + len(rc.procs)}
			rc.mu.Unlock()
		}
	}
	return out
}

// Launch starts a run on a runner of the session's agent: the runner of
// its last run when it is connected (docs/server.md#runners), else the one with fewest runs;
// a fork's start run, on the runner of the session forked (forkRunner).
func (rs *runners) Launch(ctx context.Context, run engine.Launch) (engine.Process, error) {
	rc := rs.pick(run.Record.AgentName, run.Record.RunnerID)
	if parent := forkParent(run); parent != "" {
		var err error
		if rc, err = rs.forkRunner(ctx, parent); err != nil {
			return nil, err
		}
	}
	if rc == nil {
		return nil, noRunner(run.Record)
	}
	if run.Kind == lifecycle.ActionRun && !runnerproto.DoesActions(rc.version) {
		return nil, fmt.Errorf("session %s: %w", run.Record.ID, &OldRunnerError{Runner: rc.name, Version: rc.version})
	}
	if run.Kind == lifecycle.ActionRun {
		if err := rc.checkArgs(run); err != nil {
			return nil, err
		}
	}
	if _, err := rs.Store.UpdateSession(ctx, run.Record.ID, func(r *lifecycle.Record) error {
		r.Runner, r.RunnerID = rc.name, rc.id
		r.Config, r.Dir = rc.config, rc.dir
		return nil
	}); err != nil {
		return nil, err
	}
	p, err := rc.launch(run)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", run.Record.ID, err)
	}
	return p, nil
}

// CanLaunch says whether a runner of rec's agent is connected (blaise.Checker).
func (rs *runners) CanLaunch(rec *lifecycle.Record) error {
	if rs.pick(rec.AgentName, rec.RunnerID) == nil {
		return noRunner(rec)
	}
	return nil
}

// NoRunnerError is the error of a run that no runner of its agent is
// connected to start; with Runner, of a run that only that runner may
// start (a fork's, on the runner of the session forked), not connected,
// or connected but Draining: leaving, it takes no new run.
type NoRunnerError struct {
	Session, Agent, Runner string
	Draining               bool
}

func (e *NoRunnerError) Error() string {
	if e.Draining {
		return fmt.Sprintf("session %s: its runner %s, where its environment is, is draining: its `blaise-agent listen` is stopping and takes no new run (start it again once it has stopped)", e.Session, e.Runner)
	}
	if e.Runner != "" {
		return fmt.Sprintf("session %s: its runner %s, where its environment is, is not connected (start its `blaise-agent listen --agent %s` again)", e.Session, e.Runner, e.Agent)
	}
	return fmt.Sprintf("session %s: no runner of agent %s is connected (start one with `blaise-agent listen --agent %s`)", e.Session, e.Agent, e.Agent)
}

func noRunner(rec *lifecycle.Record) error {
	return &NoRunnerError{Session: rec.ID, Agent: rec.AgentName}
}

// draining reports whether the runner of agent with the credential id is
// connected but draining (KindDrain).
func (rs *runners) draining(agent, id string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for rc := range rs.conns[agent] {
		rc.mu.Lock()
		d := rc.draining
		rc.mu.Unlock()
		if rc.id == id && d {
			return true
		}
	}
	return false
}

func (rs *runners) pick(agent, prefer string) *runnerConn {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var best *runnerConn
	bestRuns := 0
	for rc := range rs.conns[agent] {
		if !rc.takesRuns() {
			continue
		}
		if rc.id == prefer {
			return rc
		}
		rc.mu.Lock()
		n := len(rc.procs)
		rc.mu.Unlock()
		if best == nil || n < bestRuns {
			best, bestRuns = rc, n
		}
	}
	return best
}

// sessionActions lists the actions a session offers (GET
// /v1/sessions/ID/actions): those of the chain of the runner its actions
// would run on, which says them in its hello; none for an ended session.
func (rs *runners) sessionActions(w http.ResponseWriter, r *http.Request) {
	out, err := rs.SessionActions(r.Context(), r.PathValue("id"))
	if err != nil {
		failErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// SessionActions are the actions a session offers (sessionActions), for
// the API and the dashboard.
func (rs *runners) SessionActions(ctx context.Context, id string) ([]api.Action, error) {
	rec, err := rs.Store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []api.Action{}
	if rec.State != lifecycle.Ended {
		rc := rs.pick(rec.AgentName, rec.RunnerID)
		switch {
		case rc == nil:
			return nil, noRunner(rec)
		case !runnerproto.DoesActions(rc.version):
			return nil, fmt.Errorf("session %s: %w", rec.ID, &OldRunnerError{Runner: rc.name, Version: rc.version})
		}
		out = append(out, rc.actions...)
	}
	return out, nil
}
