package chain

// Handler calls: each on a pooled thread of its own, with the session lock,
// cancellable while it executes.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	startime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

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
	thread := r.threads.get(callCtx, c.Logger, &r.lock, r.runnerHost)
	thread.cancel = cancel
	defer r.threads.put(r.ctx, thread)
	r.push(thread)
	defer r.pop(thread)
	defer c.Close()
	v, err := starlark.Call(thread.Thread, fn, args, nil)
	if err != nil {
		werr := interp.WrapError(err, p.use.Plug.Name, handler)
		r.mu.Lock()
		why := thread.stopped
		r.mu.Unlock()
		if why != "" && !strings.Contains(werr.Msg, why) {
			// The cancel reached a host call (ctx.host.exec) before the
			// interpreter: its "context canceled" is the stop's doing.
			werr.Msg = why + " (" + werr.Msg + ")"
		}
		if msg := c.Agent.FrozenChange(err, sourceLine(werr.Pos)); msg != "" {
			werr.Msg = msg // ctx.agent.env["X"] = … after next(), not a bare "frozen hash table"
		}
		if !passedOn(err) {
			logFailure(r.log, handler, werr)
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
	// stopped says why the stop's grace cancelled the call, if it did;
	// guarded by the Run's mu.
	stopped string
}

// threadPool keeps the threads of ended handler calls for the next ones.
// All calls hold the session lock, so the pool needs no lock of its own.
type threadPool struct {
	opts *Options // of the run
	idle []*pooledThread
}

// get returns a thread for one handler call, with a budget of MaxSteps,
// bound to ctx, the session lock and the runner's host.
func (tp *threadPool) get(ctx context.Context, logger *log.Logger, lock *builtins.Lock, runnerHost hosts.Host) *pooledThread {
	var t *pooledThread
	if n := len(tp.idle); n > 0 {
		t, tp.idle = tp.idle[n-1], tp.idle[:n-1]
	} else {
		max := tp.opts.MaxSteps
		t = &pooledThread{Thread: &starlark.Thread{
			OnMaxSteps: func(t *starlark.Thread) {
				t.Cancel(fmt.Sprintf("stopped after %d steps: a runaway loop? (the limit of one handler call)", max))
			},
		}}
		t.Print = func(_ *starlark.Thread, msg string) { t.logger.Info(msg) }
		builtins.SetRedactions(t.Thread, tp.opts.Redactions)
		if now := tp.opts.PlugClock; now != nil {
			startime.SetNow(t.Thread, func() (time.Time, error) { return now(), nil })
		}
		if tp.opts.CountTempNames {
			builtins.CountTempNames(t.Thread)
		}
	}
	t.logger = logger
	t.SetMaxExecutionSteps(t.ExecutionSteps() + tp.opts.MaxSteps)
	// The lock and the runner's host are the run's: only ctx may differ
	// from the thread's last call (on_message calls all share r.ctx).
	if t.bound != ctx {
		builtins.BindThread(t.Thread, lock, ctx, runnerHost)
		t.bound = ctx
	}
	return t
}

// put returns a thread to the pool, unless runCtx, the run's, is done.
func (tp *threadPool) put(runCtx context.Context, t *pooledThread) {
	if runCtx.Err() != nil {
		return
	}
	t.Uncancel()
	t.stopped = ""
	tp.idle = append(tp.idle, t)
}
