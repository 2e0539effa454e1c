// Package builtins holds the Starlark values that plugs see: ctx, hosts,
// processes, persisted state, logs, PauseInfo and TeardownInfo.
package builtins

import (
	"context"
	"sync"

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

const (
	lockKey    = "blaise.lock"
	contextKey = "blaise.context"
)

// BindThread attaches the session lock and the Go context that bounds the
// thread's blocking calls.
func BindThread(thread *starlark.Thread, lock *Lock, ctx context.Context) {
	thread.SetLocal(lockKey, lock)
	thread.SetLocal(contextKey, ctx)
}

// Context returns the Go context bound to thread, or context.Background.
func Context(thread *starlark.Thread) context.Context {
	if ctx, ok := thread.Local(contextKey).(context.Context); ok {
		return ctx
	}
	return context.Background()
}

// Blocking runs f with the session lock of thread released, so that other
// handlers of the session can run while f waits.
func Blocking(thread *starlark.Thread, f func()) {
	lock, ok := thread.Local(lockKey).(*Lock)
	if !ok || lock == nil {
		f()
		return
	}
	lock.Release()
	defer lock.Acquire()
	f()
}
