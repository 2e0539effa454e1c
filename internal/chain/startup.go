package chain

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	sdk "github.com/coder/acp-go-sdk"
)

// startup bounds an agent's answer to initialize (Options.StartupLimit):
// the clock starts when the request reaches the agent and stops when its
// answer reaches the client. It sits where messages leave the chain, so a
// plug that answers initialize itself never starts it.
type startup struct {
	next  acp.Recorder // nil: nothing is recorded
	limit time.Duration
	fail  func(error)

	settled atomic.Bool // answered, or the proxy ended: nothing more to watch
	mu      sync.Mutex
	id      string // the request's id, once sent
	timer   *time.Timer
}

// watchStartup returns the recorder of a proxy that runs until ctx is
// done: the run's, watched.
func (r *Run) watchStartup(ctx context.Context) *startup {
	s := &startup{next: r.opts.Recorder, limit: r.opts.StartupLimit, fail: r.fail}
	context.AfterFunc(ctx, s.stop)
	return s
}

func (s *startup) Record(side acp.Side, m *acp.Message, by string) {
	if !s.settled.Load() {
		s.watch(side, m)
	}
	if s.next != nil {
		s.next.Record(side, m, by)
	}
}

func (s *startup) watch(side acp.Side, m *acp.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case side == acp.ToAgent && m.Kind == acp.Request && m.Method == sdk.AgentMethodInitialize && s.timer == nil:
		s.id = acp.IDKey(m.ID)
		s.timer = time.AfterFunc(s.limit, func() {
			s.fail(fmt.Errorf("the agent did not answer %s within %s (the startup limit, --startup-limit)", sdk.AgentMethodInitialize, s.limit))
		})
	case side == acp.ToClient && m.Kind == acp.Response && s.timer != nil && acp.IDKey(m.ID) == s.id:
		s.timer.Stop()
		s.settled.Store(true)
	}
}

// stop ends the watch with the proxy.
func (s *startup) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled.Store(true)
	if s.timer != nil {
		s.timer.Stop()
	}
}
