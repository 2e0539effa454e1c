package engine

import (
	"fmt"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// RunLockFD is the file descriptor of the run lock in a session process
// of this machine: the file store's run lock (filestore), which the
// session process inherits so that it is held while either lives.
const RunLockFD = 4

// activeError is what a command gets for a session whose run lock another
// process holds.
func activeError(id string) error {
	return fmt.Errorf("session %s is active: a run of it is in progress in another process", id)
}

// MemLocks are run locks of one process, for a control plane whose runs
// are not processes of its machine (a server's).
type MemLocks struct {
	mu   sync.Mutex
	held map[string]int // holders by session
}

// lifecycle.RunLock takes a session's lock; create and wait mean nothing here: a
// holder is always a run.
func (m *MemLocks) RunLock(id string, _, _ bool) (lifecycle.RunLock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[id] > 0 {
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrRunHeld)
	}
	if m.held == nil {
		m.held = map[string]int{}
	}
	m.held[id] = 1
	return &memLock{m: m, id: id}, nil
}

type memLock struct {
	m    *MemLocks
	id   string
	once sync.Once
}

func (l *memLock) Dup() (lifecycle.RunLock, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.held[l.id]++
	return &memLock{m: l.m, id: l.id}, nil
}

func (l *memLock) Release() {
	l.once.Do(func() {
		l.m.mu.Lock()
		defer l.m.mu.Unlock()
		if l.m.held[l.id]--; l.m.held[l.id] <= 0 {
			delete(l.m.held, l.id)
		}
	})
}
