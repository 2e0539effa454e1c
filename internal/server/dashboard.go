package server

import (
	"context"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
)

// EndSession ends a session (POST /v1/sessions/ID/end, the dashboard's
// End): a live run gets a closed stop, recorded before it is sent (L3); a
// paused one a teardown run, as does a live one that paused on an earlier
// stop. A session whose run no runner receives is an error, and nothing
// changes.
func (s *Server) EndSession(ctx context.Context, id string) (*lifecycle.Record, error) {
	s.init()
	if _, err := s.Store.Session(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if l := s.engine.Running(id); l != nil {
		if err := l.Stop(lifecycle.Stop{Reason: lifecycle.Closed}); err != nil {
			s.metrics.stops.Inc("refused")
			return nil, err
		}
		s.metrics.stops.Inc("sent")
		rec, err := l.Wait(ctx)
		// A stop sent before ours (idle, when its client left) pauses the
		// run; the session is ended all the same.
		if err != nil || rec.State != lifecycle.Paused {
			return rec, err
		}
	}
	return s.engine.End(ctx, id)
}

// ResolveSession ends an orphaned session once a person has cleaned up
// after it (L2).
func (s *Server) ResolveSession(ctx context.Context, id string) (*lifecycle.Record, error) {
	s.init()
	return s.engine.Resolve(ctx, id)
}

// Disconnect ends the connections of the runner with the id (revoked).
func (s *Server) Disconnect(id string) {
	s.init()
	s.mu.Lock()
	var cut []*runnerConn
	for _, conns := range s.runners {
		for rc := range conns {
			if rc.id == id {
				cut = append(cut, rc)
			}
		}
	}
	s.mu.Unlock()
	for _, rc := range cut {
		rc.mux.Close()
	}
}

// LiveRunners are the connected runners, by name, for the dashboard.
func (s *Server) LiveRunners() map[string]dashboard.LiveRunner {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]dashboard.LiveRunner{}
	for agent, conns := range s.runners {
		for rc := range conns {
			rc.mu.Lock()
			out[rc.name] = dashboard.LiveRunner{Agent: agent, Version: rc.build, Runs: out[rc.name].Runs + len(rc.procs)}
			rc.mu.Unlock()
		}
	}
	return out
}
