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
func (rs *runners) cutRevoked(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-rs.clock.After(revokedCheck):
		}
		connected := rs.connectedIDs()
		if len(connected) == 0 {
			continue
		}
		registered, err := rs.Store.Runners(ctx)
		if err != nil {
			rs.Log.Warn("looking for revoked runners", "err", err)
			continue
		}
		for _, r := range registered {
			if connected[r.ID] && !r.Revoked.IsZero() {
				rs.Log.Info("cutting the connection of a revoked runner", "runner", r.Name, "id", r.ID)
				rs.Disconnect(r.ID)
			}
		}
	}
}

// connectedIDs are the credential ids of the connected runners.
func (rs *runners) connectedIDs() map[string]bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ids := map[string]bool{}
	for _, conns := range rs.conns {
		for rc := range conns {
			ids[rc.id] = true
		}
	}
	return ids
}
