// Package runner runs a session's chain of plugs around the agent process:
// start, resume and teardown runs, next() and its rules (C1–C15).
package chain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	startime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Options configure one run.
type Options struct {
	Config      *interp.Config
	SessionID   string
	ExecutionID string
	Kind        lifecycle.Kind
	Number      int // the run's number in its session, from 1
	// EndReason is why the session ended, for Teardown runs (closed, expired …).
	EndReason lifecycle.Reason
	// PlugClock, when set, is what time.now() of the plugs reads; nil: the
	// machine's clock.
	PlugClock func() time.Time
	// CountTempNames makes host.fs.mkdtemp of the plugs name directories
	// PREFIX1, PREFIX2 … rather than at random (blaise-agent test).
	CountTempNames bool
	// EndError is the failure that ended the session, for Teardown runs
	// with EndReason failed: TeardownInfo.error (C8).
	EndError error

	Host      hosts.Host          // where the agent runs; nil: Runner
	Runner    hosts.Host          // the runner's own machine; nil: a new local host
	RunnerEnv map[string]string   // nil: the process's environment
	Store     lifecycle.Persisted // persisted plug state; nil: in memory
	Logger    *log.Logger         // nil: log.Default()

	// MaxSteps bounds the Starlark steps of one handler call; 0: DefaultMaxSteps.
	MaxSteps uint64
	// IdlePolicy decides the may_resume of a failed run (L4); "": a failed
	// run does not resume.
	IdlePolicy lifecycle.IdlePolicy
	// AgentGrace is how long the agent may take to exit after its stdin
	// closes, and again after SIGTERM; 0: DefaultAgentGrace.
	AgentGrace time.Duration
	// StopGrace is how long a handler still attaching when the run is
	// stopped may take to reach next() before it is cancelled; 0:
	// DefaultStopGrace.
	StopGrace time.Duration
	// Client is the ACP client the agent talks to, through the plugs'
	// on_message. Nil: the agent's output is drained.
	Client *Client
	// Recorder receives every message where it leaves the chain (M5).
	Recorder acp.Recorder
	// Carrier, when set, is the Recorder, and its records carry the
	// messages toward the client, instead of Client.Out (a runner's
	// session process, docs/protocol.md).
	Carrier *acp.Carrier
	// StartupLimit is how long the agent may take to answer the client's
	// initialize once it reached the agent; past it the run fails. 0:
	// DefaultStartupLimit.
	StartupLimit time.Duration
	// MaxLine bounds one ACP message; 0: acp.DefaultMaxLine.
	MaxLine int
	// OnPause receives the pause as soon as the run ends, before any
	// teardown (L7). An error is logged; the teardown still happens, and
	// Result.ReportErr holds it.
	OnPause func(builtins.PauseInfo) error
	// Redactions, when set, receives the values plugs give redact.secrets,
	// for what lets the run's output out to redact them (blaise:secrets).
	Redactions *redact.Registry
	// Action is the action of an action run (Kind session.ActionRun).
	Action *ActionCall
	// OnAttach is told, as a start or resume run attaches, the name of
	// the plug whose handlers run now, and "" when the agent starts: the
	// progress a front end shows.
	OnAttach func(plug string)
}

// Messages the runner logs at debug level for each command the local host
// starts and each ctx.set_output, which blaise-agent test reads.
const (
	LogHostCommand = "host command"
	LogSetOutput   = "set_output"
)

// Defaults for Options.
const (
	DefaultMaxSteps   = 100_000_000
	DefaultAgentGrace = 3 * time.Second
	DefaultStopGrace  = lifecycle.DefaultStopGrace
	// DefaultStartupLimit bounds an agent's answer to initialize.
	DefaultStartupLimit = lifecycle.DefaultStartupLimit
)

// Result is what a run reports (L7).
type Result struct {
	Resumable bool                // whether the chain can resume (C12)
	Pause     *builtins.PauseInfo // nil for teardown runs
	Teardown  *builtins.PauseInfo // nil when the session goes on
	// TeardownErr is the first failure of the teardown, nil when it succeeded.
	TeardownErr error
	// ReportErr is the error of OnPause, if any.
	ReportErr error
	// Action is the outcome of an action run; nil for other runs.
	Action *ActionOutcome
}

// Run is one run of a session's chain.
type Run struct {
	opts   Options
	log    *log.Logger
	lock   builtins.Lock
	signal builtins.Signal

	shutdown context.Context // done when the session shuts down
	ctx      context.Context // of handlers' blocking calls: done StopGrace after shutdown
	cancel   context.CancelFunc

	mu      sync.Mutex
	stop    *lifecycle.Stop
	stopErr error // why a failed stop failed
	stopped chan struct{}
	// agentEnded is set when the agent's output ends (acp.Proxy.OnAgentEnd),
	// which tells a crash from an exit a stop caused.
	agentEnded atomic.Bool
	frames     []*pooledThread // threads of the handler calls executing, innermost last
	// agentStarted is set once the innermost next() was reached.
	agentStarted bool

	plugs        []*plugRun
	threads      []*pooledThread // idle threads; guarded by lock
	hostValues   map[hosts.Host]starlark.Value
	runnerHost   hosts.Host // set once, when the run starts; every step reads it here
	runnerEnv    *starlark.Dict
	sessionValue starlark.Value // ctx.session
	runValue     starlark.Value // ctx.run
	setup        *builtins.Setup
	tdErr        error
	changes      *lifecycle.Changes // the last ctx.report_changes
}

// plugRun is a plug's state during the run.
type plugRun struct {
	use       *interp.Use
	loaded    bool
	loadErr   error
	inputs    starlark.Value
	state     starlark.Value
	persisted *builtins.Persisted
	outputs   map[string]starlark.Value
	order     []string
	base      *builtins.CtxBase // what the plug's ctx values share
	readOnly  []readOnlyAgent   // ctx.agent outside on_session, by handler
}

type readOnlyAgent struct {
	handler string
	agent   *builtins.AgentDraft
}

// New prepares a run.
func New(opts Options) *Run {
	if opts.Logger == nil {
		opts.Logger = log.Default()
	}
	if opts.Store == nil {
		opts.Store = builtins.NewMemStore()
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.AgentGrace == 0 {
		opts.AgentGrace = DefaultAgentGrace
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.StartupLimit == 0 {
		opts.StartupLimit = DefaultStartupLimit
	}
	if opts.Number == 0 {
		opts.Number = 1
	}
	r := &Run{opts: opts, log: opts.Logger, stopped: make(chan struct{}), hostValues: map[hosts.Host]starlark.Value{}}
	for _, u := range opts.Config.Uses {
		r.plugs = append(r.plugs, &plugRun{use: u, outputs: map[string]starlark.Value{}})
	}
	r.sessionValue = interp.NewRecord([]string{"id", "execution_id", "agent"}, []starlark.Value{
		starlark.String(opts.SessionID),
		starlark.String(opts.ExecutionID),
		interp.NewRecord([]string{"name"}, []starlark.Value{starlark.String(r.agentName())}),
	}).WithName("ctx.session")
	r.runValue = interp.NewRecord([]string{"kind", "number"}, []starlark.Value{
		starlark.String(string(opts.Kind)), starlark.MakeInt(opts.Number),
	}).WithName("ctx.run")
	r.setup = &builtins.Setup{IDs: r.ids(), Outputs: r.outputs}
	env := r.env()
	r.runnerEnv = starlark.NewDict(len(env))
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_ = r.runnerEnv.SetKey(starlark.String(k), starlark.String(env[k]))
	}
	r.runnerEnv.Freeze()
	return r
}

// env is the runner's environment without Blaise credentials (L8): what
// ctx.runner_env shows and what processes on the local host start from.
func (r *Run) env() map[string]string {
	env := r.opts.RunnerEnv
	if env == nil {
		env = map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		if !IsBlaiseSecret(k) {
			out[k] = v
		}
	}
	return out
}

// IsBlaiseSecret reports whether an environment variable carries a Blaise
// credential, which plugs never see in ctx.runner_env (L8).
func IsBlaiseSecret(name string) bool {
	if !strings.HasPrefix(name, "BLAISE_") {
		return false
	}
	for _, s := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// Stop asks the run to end: the agent is stopped and the innermost next()
// returns a PauseInfo with the stop's reason. A handler still computing is
// cancelled. Only the first stop counts.
func (r *Run) Stop(s lifecycle.Stop) { r.stopWith(s, nil) }

func (r *Run) stopWith(s lifecycle.Stop, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		return
	}
	r.stop, r.stopErr = &s, err
	close(r.stopped)
	// A handler still attaching gets StopGrace to reach next(), which then
	// returns at once; one that does not (a runaway) is cancelled.
	time.AfterFunc(r.opts.StopGrace, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.frames); n > 0 && !r.agentStarted {
			top := r.frames[n-1]
			top.Cancel(fmt.Sprintf("cancelled: the run was stopped (%s) and the handler did not reach next() within %s", s.Reason, r.opts.StopGrace))
			top.cancel()
		}
	})
}

// stopPause returns the PauseInfo of the stop, if one arrived.
func (r *Run) stopPause() *builtins.PauseInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil {
		return nil
	}
	return &builtins.PauseInfo{Pause: lifecycle.Pause{Reason: r.stop.Reason, MayResume: r.stop.MayResume, Err: r.stopErr}}
}

// Run executes the run and returns what it reports. Cancelling ctx shuts the
// session down: ctx.signal is aborted and the agent stops at once, so that
// pause code can skip what it need not do; handlers still running after
// StopGrace are cancelled, their blocking calls too.
func (r *Run) Run(ctx context.Context) Result {
	r.shutdown = ctx
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancel()
	// Ends with ctx or r.ctx, cancelled as Run returns.
	go func() {
		select {
		case <-ctx.Done():
		case <-r.ctx.Done():
			return
		}
		r.signal.Abort("the session is shutting down")
		select {
		case <-time.After(r.opts.StopGrace):
		case <-r.ctx.Done():
			return
		}
		r.mu.Lock()
		for _, t := range r.frames {
			t.Cancel("cancelled: the session is shutting down")
		}
		r.mu.Unlock()
		r.cancel()
	}()

	runnerHost := r.opts.Runner
	if runnerHost == nil {
		runnerHost = hosts.NewLocal(hosts.LocalOptions{BaseEnv: r.env(), OnCommand: func(argv []string, dir string) {
			r.log.Debug(LogHostCommand, "argv", argv, "dir", dir)
		}})
		defer runnerHost.Close()
	}
	host := r.opts.Host
	if host == nil {
		host = runnerHost
	}
	r.hostValues[runnerHost] = builtins.NewHost(runnerHost, "runner")
	r.runnerHost = runnerHost

	res := Result{Resumable: r.opts.Config.Resumable()}
	if r.opts.Kind == lifecycle.ActionRun {
		r.lock.Acquire()
		defer r.lock.Release()
		out := r.act(host)
		out.Changes = r.changes
		res.Action = &out
		return res
	}
	if !res.Resumable {
		r.log.Warn("the chain cannot resume", "plugs", strings.Join(r.unresumable(), ", "))
	}
	r.lock.Acquire()
	defer r.lock.Release()

	endReason, cause := r.opts.EndReason, r.opts.EndError
	if r.opts.Kind != lifecycle.TeardownRun {
		a := r.opts.Config.Agent
		draft := builtins.NewAgentDraft(a.Command, a.Args, a.Env, a.Cwd)
		pause := r.session(0, draft, host)
		if pause.Reason != lifecycle.Failed && pause.MayResume && !res.Resumable {
			r.log.Warn("pausing as asked, although a plug cannot resume", "plugs", strings.Join(r.unresumable(), ", "))
		}
		pause.Changes = r.changes
		res.Pause = &pause
		if r.opts.OnPause != nil {
			r.unlocked(func() { res.ReportErr = r.opts.OnPause(pause) })
			if res.ReportErr != nil {
				// L7: a pause that cannot be reported still ends in a
				// teardown when the session is over.
				r.log.Error("reporting the pause failed", "err", res.ReportErr)
			}
		}
		if pause.MayResume {
			return res
		}
		endReason, cause = pause.Reason, pause.Err
	}
	if endReason == "" {
		endReason = lifecycle.Closed
	}
	td := r.teardown(r.teardownOrder(), 0, endReason, cause, host)
	res.Teardown, res.TeardownErr = &td, r.tdErr
	return res
}

func (r *Run) unresumable() []string {
	var names []string
	for _, u := range r.opts.Config.Uses {
		if !u.Plug.Resumable {
			names = append(names, u.Name())
		}
	}
	return names
}

// failed is the PauseInfo of a failure.
func (r *Run) failed(err error) builtins.PauseInfo {
	r.mu.Lock()
	// A failure after a stop that ends the session does not revive it.
	mayResume := r.opts.IdlePolicy.MayResume(lifecycle.Failed, r.opts.Config.Resumable(), r.stop)
	r.mu.Unlock()
	return builtins.PauseInfo{Pause: lifecycle.Pause{Reason: lifecycle.Failed, Err: err, MayResume: mayResume}}
}

// session runs on_session of plug i and everything inside it (C1–C5).
func (r *Run) session(i int, draft *builtins.AgentDraft, host hosts.Host) builtins.PauseInfo {
	if i == len(r.plugs) {
		r.attaching("")
		return r.runAgent(draft, host)
	}
	p := r.plugs[i]
	r.attaching(p.use.Plug.Name)
	if err := r.load(p, host); err != nil {
		return r.failed(err)
	}
	fn := p.use.Plug.OnSession
	if fn == nil {
		return r.session(i+1, draft, host)
	}
	mine := draft.For(p.use.Plug.Name)
	var inner builtins.PauseInfo
	calls := 0
	next := r.nextBuiltin(p, &calls, host, func(h hosts.Host) starlark.Value {
		mine.Freeze()
		inner = r.session(i+1, mine, h)
		return &inner
	})
	c := r.newCtx(p, "on_session", host)
	c.Agent = mine
	if _, err := r.call(p, "on_session", fn, c, starlark.Tuple{c, next}); err != nil {
		return r.failed(err)
	}
	if calls == 0 {
		return r.failed(r.handlerError(p, "on_session", fn, "returned without calling next(); call next() exactly once"))
	}
	return inner
}

// attaching tells OnAttach what attaches now.
func (r *Run) attaching(plug string) {
	if r.opts.OnAttach != nil {
		r.opts.OnAttach(plug)
	}
}

// teardown runs on_teardown of the k-th plug of order and everything
// inside it (C8).
func (r *Run) teardown(order []int, k int, reason lifecycle.Reason, cause error, host hosts.Host) builtins.PauseInfo {
	if k == len(order) {
		info := builtins.PauseInfo{Teardown: true, Pause: lifecycle.Pause{Reason: reason, Err: cause}}
		return info
	}
	p := r.plugs[order[k]]
	fail := func(err error) builtins.PauseInfo {
		if r.tdErr == nil {
			r.tdErr = err
		}
		return builtins.PauseInfo{Teardown: true, Pause: lifecycle.Pause{Reason: lifecycle.Failed, Err: err}}
	}
	if err := r.load(p, host); err != nil {
		return fail(err)
	}
	fn := p.use.Plug.OnTeardown
	var inner builtins.PauseInfo
	calls := 0
	next := r.nextBuiltin(p, &calls, host, func(h hosts.Host) starlark.Value {
		inner = r.teardown(order, k+1, reason, cause, h)
		return &inner
	})
	c := r.newCtx(p, "on_teardown", host)
	if _, err := r.call(p, "on_teardown", fn, c, starlark.Tuple{c, next}); err != nil {
		return fail(err)
	}
	if calls == 0 {
		return fail(r.handlerError(p, "on_teardown", fn, "returned without calling next(); call next() exactly once"))
	}
	return inner
}

// teardownOrder lists the plugs that take part in a teardown, outermost first.
func (r *Run) teardownOrder() []int {
	var order []int
	for i, p := range r.plugs {
		if p.use.Plug.OnTeardown != nil {
			order = append(order, i)
		}
	}
	return order
}

// nextBuiltin makes the next(host = None) of one handler call. inner runs
// everything inside the plug on the given host.
func (r *Run) nextBuiltin(p *plugRun, calls *int, host hosts.Host, inner func(hosts.Host) starlark.Value) *starlark.Builtin {
	return starlark.NewBuiltin("next", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var hv starlark.Value = starlark.None
		if err := starlark.UnpackArgs("next", args, kwargs, "host?", &hv); err != nil {
			return nil, err
		}
		*calls++
		if *calls > 1 {
			return nil, fmt.Errorf("next() called twice; call it exactly once")
		}
		h := host
		if hv != starlark.None {
			var ok bool
			if h, ok = builtins.HostOf(hv); !ok {
				return nil, fmt.Errorf("next: host: want a host, got %s", hv.Type())
			}
		}
		// Only a host this next() introduces is closed with it: the
		// current host and the runner's own stay open.
		switched := h != host && h != r.runnerHost
		if switched {
			// Inner plugs see the value the plug made as ctx.host.
			r.hostValues[h] = hv
		}
		v := inner(h)
		if switched {
			// C6: the host lives as long as the next() that introduced it.
			var err error
			r.unlocked(func() { err = h.Close() })
			if err != nil {
				r.log.Warn("closing the host failed", "plug", p.use.Plug.Name, "err", err)
			}
		}
		return v, nil
	})
}

// handlerError is a failure of the chain's rules in a handler, logged as
// a handler's own failure is (call).
func (r *Run) handlerError(p *plugRun, handler string, fn *starlark.Function, msg string) error {
	err := &interp.Error{Pos: fn.Position(), Plug: p.use.Plug.Name, Handler: handler, Msg: msg}
	r.log.Error("handler failed", "err", err)
	return err
}

// unlocked runs f with the session lock released.
func (r *Run) unlocked(f func()) {
	r.lock.Release()
	defer r.lock.Acquire()
	f()
}

// push records the thread of an executing handler call, for cancellation;
// pop removes it.
func (r *Run) push(t *pooledThread) {
	r.mu.Lock()
	r.frames = append(r.frames, t)
	r.mu.Unlock()
}

func (r *Run) pop(t *pooledThread) {
	// on_message calls interleave: remove t itself, not the last frame.
	r.mu.Lock()
	if n := len(r.frames); n > 0 && r.frames[n-1] == t {
		r.frames[n-1] = nil
		r.frames = r.frames[:n-1]
	} else if i := slices.Index(r.frames, t); i >= 0 {
		r.frames = slices.Delete(r.frames, i, i+1)
	}
	r.mu.Unlock()
}

// noCancel is the cancel of calls that only the session's end cancels.
func noCancel() {}

// call runs one handler on a thread of its own, bound to c (C15).
func (r *Run) call(p *plugRun, handler string, fn starlark.Callable, c *builtins.Ctx, args starlark.Tuple) (starlark.Value, error) {
	// on_message runs while the agent runs: only the session's end cancels
	// it. The handlers of the chain can be cancelled one by one (StopGrace).
	callCtx, cancel := r.ctx, context.CancelFunc(noCancel)
	if handler != "on_message" {
		callCtx, cancel = context.WithCancel(r.ctx)
		defer cancel()
	}
	thread := r.thread(callCtx, c.Logger)
	thread.cancel = cancel
	defer r.release(thread)
	r.push(thread)
	defer r.pop(thread)
	defer c.Close()
	v, err := starlark.Call(thread.Thread, fn, args, nil)
	if err != nil {
		werr := interp.WrapError(err, p.use.Plug.Name, handler)
		if msg := c.Agent.FrozenChange(err, sourceLine(werr.Pos)); msg != "" {
			werr.Msg = msg // ctx.agent.env["X"] = … after next(), not a bare "frozen hash table"
		}
		if !passedOn(err) {
			r.log.Error("handler failed", "err", werr)
		}
		return nil, werr
	}
	return v, nil
}

// sourceLine returns the line of a plug file at pos, or "" when it cannot
// be read (a plug of the standard library, say).
func sourceLine(pos syntax.Position) string {
	if !pos.IsValid() {
		return ""
	}
	src, err := interp.ReadSource(pos.Filename())
	if err != nil {
		return ""
	}
	lines := strings.Split(string(src), "\n")
	if n := int(pos.Line); n >= 1 && n <= len(lines) {
		return lines[n-1]
	}
	return ""
}

// passedOn reports whether err is the failure of an inner handler that
// next() passed on: it was logged where it happened.
func passedOn(err error) bool {
	var evalErr *starlark.EvalError
	if !errors.As(err, &evalErr) {
		return false
	}
	inner, ok := evalErr.Unwrap().(*interp.Error)
	return ok && inner.Handler != ""
}

// pooledThread is a thread with the logger and the cancel of the call it
// runs.
type pooledThread struct {
	*starlark.Thread
	logger *log.Logger
	cancel context.CancelFunc
	bound  context.Context // the context BindThread gave the thread last
}

// thread returns a thread for one handler call, with a budget of
// MaxSteps. Threads are reused: all calls hold the session lock, so the
// pool needs no lock of its own.
func (r *Run) thread(ctx context.Context, logger *log.Logger) *pooledThread {
	var t *pooledThread
	if n := len(r.threads); n > 0 {
		t, r.threads = r.threads[n-1], r.threads[:n-1]
	} else {
		max := r.opts.MaxSteps
		t = &pooledThread{Thread: &starlark.Thread{
			OnMaxSteps: func(t *starlark.Thread) {
				t.Cancel(fmt.Sprintf("stopped after %d steps: a runaway loop? (the limit of one handler call)", max))
			},
		}}
		t.Print = func(_ *starlark.Thread, msg string) { t.logger.Info(msg) }
		builtins.SetRedactions(t.Thread, r.opts.Redactions)
		if now := r.opts.PlugClock; now != nil {
			startime.SetNow(t.Thread, func() (time.Time, error) { return now(), nil })
		}
		if r.opts.CountTempNames {
			builtins.CountTempNames(t.Thread)
		}
	}
	t.logger = logger
	t.SetMaxExecutionSteps(t.ExecutionSteps() + r.opts.MaxSteps)
	// The lock and the runner's host are the run's: only ctx may differ
	// from the thread's last call (on_message calls all share r.ctx).
	if t.bound != ctx {
		builtins.BindThread(t.Thread, &r.lock, ctx, r.runnerHost)
		t.bound = ctx
	}
	return t
}

// release returns a thread to the pool.
func (r *Run) release(t *pooledThread) {
	if r.ctx.Err() != nil {
		return
	}
	t.Uncancel()
	r.threads = append(r.threads, t)
}

// load evaluates and validates the plug's inputs (C14), migrates its
// persisted value (C9) and runs on_load, once per run.
func (r *Run) load(p *plugRun, host hosts.Host) error {
	if p.loaded {
		return p.loadErr
	}
	p.loaded = true
	p.loadErr = r.loadPlug(p, host)
	return p.loadErr
}

func (r *Run) loadPlug(p *plugRun, host hosts.Host) error {
	u := p.use
	inputs := u.Inputs
	if !u.Static {
		v, err := r.evalInputs(p, inputs, host)
		if err != nil {
			return err
		}
		inputs = v.(*starlark.Dict)
	}
	valid, err := interp.ValidateInputs(u, inputs)
	if err != nil {
		return &interp.Error{Pos: u.Pos, Msg: err.Error()}
	}
	p.inputs = valid

	if schema := u.Plug.Persisted; schema != nil {
		p.persisted = &builtins.Persisted{Store: r.opts.Store, Session: r.opts.SessionID, PlugID: u.ID, Plug: u.Plug.Name, Schema: schema}
		if err := r.loadPersisted(p, host); err != nil {
			return err
		}
	}
	if fn := u.Plug.OnLoad; fn != nil {
		c := r.newCtx(p, "on_load", host)
		v, err := r.call(p, "on_load", fn, c, starlark.Tuple{c})
		if err != nil {
			return err
		}
		p.state = v
	} else {
		p.state = starlark.NewDict(0)
	}
	return nil
}

// loadPersisted reads the stored value and migrates it when it no longer
// validates (C9).
func (r *Run) loadPersisted(p *plugRun, host hosts.Host) error {
	u := p.use
	var data []byte
	var ok bool
	var err error
	r.unlocked(func() { data, ok, err = r.opts.Store.Get(r.ctx, r.opts.SessionID, u.ID) })
	if err != nil {
		return fmt.Errorf("plug %s: reading persisted state: %w", u.Name(), err)
	}
	if !ok {
		return nil
	}
	stored, err := interp.FromJSON(data)
	if err != nil {
		return fmt.Errorf("plug %s: stored persisted state is not JSON: %w", u.Name(), err)
	}
	v, verr := u.Plug.Persisted.ValidateHidden(stored, "persisted")
	if verr == nil {
		p.persisted.Value = v
		return nil
	}
	fn := u.Plug.OnMigrate
	if fn == nil {
		return &interp.Error{Pos: u.Plug.Pos, Plug: u.Plug.Name, Msg: fmt.Sprintf("the stored persisted value no longer validates, and the plug has no on_migrate(ctx, stored):\n%v", verr)}
	}
	c := r.newCtx(p, "on_migrate", host)
	migrated, err := r.call(p, "on_migrate", fn, c, starlark.Tuple{c, stored})
	if err != nil {
		return err
	}
	if migrated == starlark.None {
		r.unlocked(func() { err = r.opts.Store.Delete(r.ctx, r.opts.SessionID, u.ID) })
		return err
	}
	valid, enc, err := builtins.EncodePersisted(u.Plug.Persisted, migrated)
	if err != nil {
		return r.handlerError(p, "on_migrate", fn, "the migrated value does not validate: "+err.Error())
	}
	r.unlocked(func() { err = r.opts.Store.Set(r.ctx, r.opts.SessionID, u.ID, u.Plug.Name, enc) })
	if err != nil {
		return fmt.Errorf("plug %s: writing migrated persisted state: %w", u.Name(), err)
	}
	p.persisted.Value = valid
	return nil
}

// evalInputs calls every function in v with a ctx of the plug: the view of
// the run that inputs are functions of (C14).
func (r *Run) evalInputs(p *plugRun, v starlark.Value, host hosts.Host) (starlark.Value, error) {
	each := func(elems []starlark.Value) ([]starlark.Value, error) {
		out := make([]starlark.Value, len(elems))
		for i, e := range elems {
			x, err := r.evalInputs(p, e, host)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	switch v := v.(type) {
	case starlark.Callable:
		c := r.newCtx(p, "inputs", host)
		return r.call(p, "inputs", v, c, starlark.Tuple{c})
	case *starlark.Dict:
		out := starlark.NewDict(v.Len())
		for _, item := range v.Items() {
			x, err := r.evalInputs(p, item[1], host)
			if err != nil {
				return nil, err
			}
			_ = out.SetKey(item[0], x)
		}
		return out, nil
	case *starlark.List:
		elems := make([]starlark.Value, v.Len())
		for i := range elems {
			elems[i] = v.Index(i)
		}
		out, err := each(elems)
		return starlark.NewList(out), err
	case starlark.Tuple:
		out, err := each(v)
		return starlark.Tuple(out), err
	}
	return v, nil
}

// newCtx makes the ctx of one handler call.
func (r *Run) newCtx(p *plugRun, handler string, host hosts.Host) *builtins.Ctx {
	c := new(builtins.Ctx)
	r.initCtx(c, p, handler, r.hostValue(host))
	return c
}

// initCtx makes c the ctx of a call of the plug's handler, on the host
// whose value is host.
func (r *Run) initCtx(c *builtins.Ctx, p *plugRun, handler string, host starlark.Value) {
	if p.base == nil {
		p.base = &builtins.CtxBase{
			PlugName:  p.use.Plug.Name,
			PlugID:    p.use.ID,
			PlugIndex: p.use.Index,
			// Set before loading: input functions run before it.
			PersistedDeclared: p.use.Plug.Persisted != nil,
			Session:           r.sessionValue,
			Run:               r.runValue,
			Setup:             r.setup,
			RunnerEnv:         r.runnerEnv,
			Logger:            r.log.WithPrefix(p.use.Plug.Name),
			Signal:            &r.signal,
			Runner:            r.hostValue(r.runnerHost),
			SetOutput:         p.setOutput,
			ReportChanges:     func(c lifecycle.Changes) { r.changes = &c },
		}
	}
	p.base.Inputs, p.base.State, p.base.Persisted = p.inputs, p.state, p.persisted
	*c = builtins.Ctx{CtxBase: p.base, Handler: handler, Host: host, Agent: r.readOnlyAgent(p, handler)}
}

// readOnlyAgent returns the plug's ctx.agent in handler, which cannot
// change it: ctx.agent is writable only in on_session before next(), where
// session() replaces this read-only copy with the plug's draft.
func (r *Run) readOnlyAgent(p *plugRun, handler string) *builtins.AgentDraft {
	// A few handlers, looked for at every on_message: a slice is quicker
	// than a map.
	for _, ro := range p.readOnly {
		if ro.handler == handler {
			return ro.agent
		}
	}
	a := r.opts.Config.Agent
	agent := builtins.NewAgentDraft(a.Command, a.Args, a.Env, a.Cwd).For(p.use.Plug.Name).ReadOnlyIn(handler)
	p.readOnly = append(p.readOnly, readOnlyAgent{handler, agent})
	return agent
}

// setOutput publishes an output of the plug for later plugs (C10).
func (p *plugRun) setOutput(name string, v starlark.Value) error {
	if _, ok := p.outputs[name]; !ok {
		p.order = append(p.order, name)
	}
	p.outputs[name] = v
	if p.base.Logger.GetLevel() <= log.DebugLevel {
		p.base.Logger.Debug(LogSetOutput, "name", name, "value", v.String())
	}
	return nil
}

func (r *Run) agentName() string {
	return filepath.Base(r.opts.Config.Agent.Command)
}

func (r *Run) hostValue(h hosts.Host) starlark.Value {
	if v, ok := r.hostValues[h]; ok {
		return v
	}
	v := builtins.NewHost(h, "host")
	r.hostValues[h] = v
	return v
}

func (r *Run) ids() []string {
	var ids []string
	for _, p := range r.plugs {
		if p.use.ID != "" {
			ids = append(ids, p.use.ID)
		}
	}
	return ids
}

// outputs returns the outputs plug id published in this run (C10).
func (r *Run) outputs(id string) *interp.Record {
	for _, p := range r.plugs {
		if p.use.ID == id {
			vals := make([]starlark.Value, len(p.order))
			for i, k := range p.order {
				vals[i] = p.outputs[k]
			}
			return interp.NewRecord(p.order, vals).WithName("setup[" + id + "].outputs")
		}
	}
	return interp.NewRecord(nil, nil)
}

// runAgent starts the agent from draft on host and waits until the run is
// stopped or the agent exits; it is the innermost next() (C3).
func (r *Run) runAgent(draft *builtins.AgentDraft, host hosts.Host) builtins.PauseInfo {
	r.mu.Lock()
	r.agentStarted = true
	r.mu.Unlock()
	if p := r.stopPause(); p != nil {
		return *p
	}
	argv, env, cwd, err := draft.Spec()
	if err != nil {
		return r.failed(fmt.Errorf("agent: %w", err))
	}
	agentCtx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	var proc hosts.Process
	r.unlocked(func() { proc, err = host.Spawn(agentCtx, hosts.SpawnSpec{Argv: argv, Dir: cwd, Env: env}) })
	if err != nil {
		return r.failed(fmt.Errorf("the agent failed to start: %w", err))
	}
	r.log.Debug("agent started", "pid", proc.Pid(), "argv", strings.Join(argv, " "))

	attached := make(chan error, 1)
	tail := &stderrTail{}
	// Both waited for below (attached, exited).
	go func() { attached <- r.attach(agentCtx, proc, host, tail) }()
	exited := make(chan int, 1)
	var waitErr error // set before exited is sent
	go func() {
		code, err := proc.Wait()
		waitErr = err
		exited <- code
	}()

	var pause builtins.PauseInfo
	crashed := false // the agent ended on its own, and not well
	// ended is the pause of an agent that ended on its own with code, and
	// whether that was a crash.
	ended := func(code int) (builtins.PauseInfo, bool) {
		if waitErr != nil {
			// The host lost it: the stream to a far host broke.
			return r.failed(fmt.Errorf("the agent's host failed: %w", waitErr)), true
		}
		return r.failed(fmt.Errorf("the agent exited with code %d", code)), code != 0
	}
	r.unlocked(func() {
		select {
		case code := <-exited:
			pause, crashed = ended(code)
		case <-r.stopped:
			pause, crashed = r.agentStopped(proc, exited, ended)
		case <-r.shutdown.Done():
			pause = r.failed(errors.New("the session shut down"))
			r.stopAgent(proc, exited)
		}
		// What the agent left in its process group goes with it.
		_ = proc.Kill()
		// The proxy reads what the agent wrote before it exited; then it
		// is stopped even if something still holds the agent's output.
		select {
		case <-attached:
		case <-time.After(r.opts.AgentGrace):
			// A process that left the agent's group (setsid) may hold
			// its output open: stop reading it.
			cancel()
			_ = proc.Stdout().Close()
			_ = proc.Stderr().Close()
			<-attached
		}
	})
	if p := r.stopPause(); p != nil && r.shutdown.Err() == nil && !crashed {
		// A stop that arrived while the agent was exiting still names the
		// pause; a crash before it stays a failure (C3), whatever the
		// front end, which saw its turn fail, asked for next.
		return *p
	}
	if pause.Err != nil && tail.String() != "" {
		pause.Err = fmt.Errorf("%w%s", pause.Err, tail)
	}
	return pause
}

// agentStopped ends the agent of a run that was stopped, and returns the
// pause. An agent whose output had ended before the stop came may have
// caused it (the front end stops a run whose turn failed as the agent
// went): if it then exits on its own, ended says what the run was.
func (r *Run) agentStopped(proc hosts.Process, exited <-chan int, ended func(code int) (builtins.PauseInfo, bool)) (builtins.PauseInfo, bool) {
	if r.agentEnded.Load() {
		select {
		case code := <-exited:
			if p, crashed := ended(code); crashed {
				return p, true
			}
			return *r.stopPause(), false
		case <-time.After(r.opts.AgentGrace):
		}
	}
	r.stopAgent(proc, exited)
	return *r.stopPause(), false
}

// stopAgent ends the agent: its stdin closes, then SIGTERM, then SIGKILL,
// each after the grace period.
func (r *Run) stopAgent(proc hosts.Process, exited <-chan int) {
	_ = proc.Stdin().Close()
	grace := r.opts.AgentGrace
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	_ = proc.Signal("TERM")
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	r.log.Warn("the agent ignored SIGTERM; killing it", "pid", proc.Pid())
	_ = proc.Kill()
	<-exited
}

// attach connects the agent's streams; stderr goes to the log, and its
// last lines to tail.
func (r *Run) attach(ctx context.Context, proc hosts.Process, host hosts.Host, tail *stderrTail) error {
	done := make(chan struct{})
	// Waited for below (done).
	go func() {
		defer close(done)
		tail.read(r.log.WithPrefix("agent"), proc.Stderr())
	}()
	var err error
	if r.opts.Client != nil {
		err = r.proxy(ctx, proc, host)
	} else {
		_, err = io.Copy(io.Discard, proc.Stdout())
	}
	<-done
	return err
}

// stderrTail keeps the last lines of the agent's stderr, to explain a crash.
type stderrTail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 5

func (t *stderrTail) read(l *log.Logger, rd io.Reader) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		l.Debug(line)
		t.mu.Lock()
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[1:]
		}
		t.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, rd)
}

func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ends with:\n  " + strings.Join(t.lines, "\n  ")
}
