// Package runner runs a session's chain of plugs around the agent process:
// start, resume and teardown runs, next() and its rules (C1–C15).
package chain

import (
	"context"
	"fmt"
	"os"
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
	"go.starlark.net/starlark"
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
	// ForkedFrom is the session this one is a fork of (ctx.session.forked_from);
	// in its start run, each plug sees that session's persisted value as
	// ctx.persisted.parent.
	ForkedFrom string
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
	// Action is the action of an action run (Kind lifecycle.ActionRun).
	Action *ActionCall
	// OnAttach is told, as a start or resume run attaches, the name of
	// the plug whose handlers run now, and "" when the agent starts: the
	// progress a front end shows.
	OnAttach func(plug string)
	// PlugLog, when set, keeps the lines the plugs log (ctx.log) for the
	// run's store, besides Logger.
	PlugLog *PlugLog
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

	plugs        chainPlugs
	threads      threadPool // guarded by lock
	hostValues   hostValues
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
	r := &Run{opts: opts, log: opts.Logger, stopped: make(chan struct{}), hostValues: hostValues{}}
	r.threads.opts = &r.opts
	for _, u := range opts.Config.Uses {
		r.plugs = append(r.plugs, &plugRun{use: u, outputs: map[string]starlark.Value{}})
	}
	var forkedFrom starlark.Value = starlark.None
	if opts.ForkedFrom != "" {
		forkedFrom = starlark.String(opts.ForkedFrom)
	}
	r.sessionValue = interp.NewRecord([]string{"id", "execution_id", "agent", "forked_from"}, []starlark.Value{
		starlark.String(opts.SessionID),
		starlark.String(opts.ExecutionID),
		interp.NewRecord([]string{"name"}, []starlark.Value{starlark.String(r.opts.agentName())}),
		forkedFrom,
	}).WithName("ctx.session")
	r.runValue = interp.NewRecord([]string{"kind", "number"}, []starlark.Value{
		starlark.String(string(opts.Kind)), starlark.MakeInt(opts.Number),
	}).WithName("ctx.run")
	r.setup = &builtins.Setup{IDs: r.plugs.ids(), Outputs: r.plugs.outputs}
	env := r.opts.env()
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
func (o *Options) env() map[string]string {
	env := o.RunnerEnv
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
			top.stopped = fmt.Sprintf("cancelled: the run was stopped (%s) and the handler did not reach next() within %s", s.Reason, r.opts.StopGrace)
			top.Cancel(top.stopped)
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

// Execute does the run and returns what it reports. Cancelling ctx shuts the
// session down: ctx.signal is aborted and the agent stops at once, so that
// pause code can skip what it need not do; handlers still running after
// StopGrace are cancelled, their blocking calls too.
func (r *Run) Execute(ctx context.Context) Result {
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
		runnerHost = hosts.NewLocal(hosts.LocalOptions{BaseEnv: r.opts.env(), OnCommand: func(argv []string, dir string) {
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
		r.log.Warn("the chain cannot resume", "plugs", strings.Join(r.plugs.unresumable(), ", "))
	}
	r.lock.Acquire()
	defer r.lock.Release()

	endReason, cause := r.opts.EndReason, r.opts.EndError
	if r.opts.Kind != lifecycle.TeardownRun {
		a := r.opts.Config.Agent
		draft := builtins.NewAgentDraft(a.Command, a.Args, a.Env, a.Cwd)
		pause := r.session(0, draft, host)
		if pause.Reason != lifecycle.Failed && pause.MayResume && !res.Resumable {
			r.log.Warn("pausing as asked, although a plug cannot resume", "plugs", strings.Join(r.plugs.unresumable(), ", "))
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
	td := r.teardown(r.plugs.teardownOrder(), 0, endReason, cause, host)
	res.Teardown, res.TeardownErr = &td, r.tdErr
	return res
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
	logFailure(r.log, handler, err)
	return err
}

// logFailure logs that a handler failed. An action's failure is its
// outcome, which the one who asked for it shows (sessions do, the
// dashboard): said again in the log, it would be said twice.
func logFailure(l *log.Logger, handler string, err error) {
	if handler == "on_action" {
		l.Debug("handler failed", "err", err)
		return
	}
	l.Error("handler failed", "err", err)
}
