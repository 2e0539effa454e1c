package engine

import (
	"context"
	"sync"
)

// runs are the runs in progress of an engine, by session.
type runs struct {
	mu    sync.Mutex
	lives map[string]*Live
}

// Running returns the run in progress of a session, if this engine
// started one.
func (r *runs) Running(id string) *Live {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lives[id]
}

// Noted waits until the ACP sessions that the runs in progress opened so
// far are recorded (Live.Noted), or ctx ends: a list of sessions read then
// has them.
func (r *runs) Noted(ctx context.Context) error {
	r.mu.Lock()
	waits := make([]<-chan struct{}, 0, len(r.lives))
	for _, l := range r.lives {
		waits = append(waits, l.Noted())
	}
	r.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *runs) track(l *Live, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !running {
		if r.lives[l.ID] == l {
			delete(r.lives, l.ID)
		}
		return
	}
	if r.lives == nil {
		r.lives = map[string]*Live{}
	}
	r.lives[l.ID] = l
}

// Claim returns the run of a session that Adopt took over, once: the front
// end that claims it takes its messages. Nil when there is none.
func (r *runs) Claim(id string) *Live {
	l := r.Running(id)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unclaimed {
		return nil
	}
	l.unclaimed = false
	return l
}
