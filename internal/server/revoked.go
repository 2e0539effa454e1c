package server

import (
	"context"
	"time"
)

// revokedCheck is how often the server looks for connected runners whose
// credential was revoked: `tokens revoke` writes the store, not to the
// server, and the connection of a revoked runner must not outlive that
// by long.
const revokedCheck = 2 * time.Second

// cutRevoked cuts, until ctx ends, the connections of runners whose
// credential is revoked, as the dashboard's Revoke does at once.
func (s *Server) cutRevoked(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock().After(revokedCheck):
		}
		connected := s.connectedIDs()
		if len(connected) == 0 {
			continue
		}
		rs, err := s.Store.Runners(ctx)
		if err != nil {
			s.log().Warn("looking for revoked runners", "err", err)
			continue
		}
		for _, r := range rs {
			if connected[r.ID] && !r.Revoked.IsZero() {
				s.log().Info("cutting the connection of a revoked runner", "runner", r.Name, "id", r.ID)
				s.Disconnect(r.ID)
			}
		}
	}
}

// connectedIDs are the credential ids of the connected runners.
func (s *Server) connectedIDs() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := map[string]bool{}
	for _, conns := range s.runners {
		for rc := range conns {
			ids[rc.id] = true
		}
	}
	return ids
}
