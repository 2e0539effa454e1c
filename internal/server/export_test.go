package server

import "github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"

// Engine is the lifecycle engine of the server's sessions, for the rule
// suite (enginetest): its Store, Locks and Launcher are the server's.
func (s *Server) Engine() *engine.Engine {
	s.init()
	return s.engine
}
