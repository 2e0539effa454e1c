// Package builtins holds the Starlark values that plugs see: ctx, hosts,
// processes, persisted state, logs, PauseInfo and TeardownInfo.
package builtins

import (
	"context"
	"sync"

	"github.com/blaiseagent/blaise-agent/hosts"
	"go.starlark.net/starlark"
)

// Lock is a session's interpreter lock. Starlark code of one session runs
// only while its goroutine holds the lock (C15); builtins that wait on the
// outside world release it with Blocking so other handlers can run meanwhile.
type Lock struct{ mu sync.Mutex }

// Acquire takes the lock.
func (l *Lock) Acquire() { l.mu.Lock() }

// Release gives the lock up.
func (l *Lock) Release() { l.mu.Unlock() }

// callKey is the thread local holding the *call a thread serves.
const callKey = "blaise.call"

// call is what builtins need from the handler call a thread runs. It is
// one local, updated in place, so that reusing a thread for the next call
// costs no map writes.
type call struct {
	lock   *Lock
	ctx    context.Context
	runner hosts.Host // the runner's machine, where hosts.command runs by default
}

// BindThread attaches the session lock, the Go context that bounds the
// thread's blocking calls, and the runner's own machine, where hosts.command
// and hosts.ssh start their commands unless told otherwise.
func BindThread(thread *starlark.Thread, lock *Lock, ctx context.Context, runner hosts.Host) {
	if c, ok := thread.Local(callKey).(*call); ok {
		c.lock, c.ctx, c.runner = lock, ctx, runner
		return
	}
	thread.SetLocal(callKey, &call{lock: lock, ctx: ctx, runner: runner})
}

// Context returns the Go context bound to thread, or context.Background.
func Context(thread *starlark.Thread) context.Context {
	if c, ok := thread.Local(callKey).(*call); ok && c.ctx != nil {
		return c.ctx
	}
	return context.Background()
}

// Blocking runs f with the session lock of thread released, so that other
// handlers of the session can run while f waits.
func Blocking(thread *starlark.Thread, f func()) {
	c, ok := thread.Local(callKey).(*call)
	if !ok || c.lock == nil {
		f()
		return
	}
	c.lock.Release()
	defer c.lock.Acquire()
	f()
}
