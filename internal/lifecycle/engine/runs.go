package engine

import "sync"

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
