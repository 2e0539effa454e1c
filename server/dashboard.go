package server

import "github.com/blaiseagent/blaise-agent/dashboard"

// LiveRunners are the connected runners, by name, for the dashboard.
func (s *Server) LiveRunners() map[string]dashboard.LiveRunner {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]dashboard.LiveRunner{}
	for agent, conns := range s.runners {
		for rc := range conns {
			rc.mu.Lock()
			out[rc.name] = dashboard.LiveRunner{Agent: agent, Runs: out[rc.name].Runs + len(rc.procs)}
			rc.mu.Unlock()
		}
	}
	return out
}
