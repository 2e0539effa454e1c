package server

import (
	"context"
	"io"

	"github.com/blaiseagent/blaise-agent/internal/acp/front"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
)

// serveACP serves the ACP front end of agent a to one client, whose API
// token is owner's, reading its messages from in and writing to out, until
// in ends or ctx does; then the client's sessions stop as idle (L9).
func (s *Server) serveACP(ctx context.Context, a *sqlstore.Agent, owner string, in io.Reader, out io.Writer) error {
	front := &front.Server{
		Sessions: front.ForAgent(s.engine, a.Name, owner, a.Settings),
		// No Config: each runner loads its own, and a session records the
		// one of the runner that runs it (Launch).
		In:      in,
		Out:     out,
		Log:     s.log().With("agent", a.Name),
		Version: s.Version,
	}
	return front.Run(ctx)
}

// openACP connects the dashboard, in this process, to the ACP front end
// of an agent: the one GET /v1/agents/NAME/acp serves over a WebSocket.
// The connection lasts until the dashboard closes it or ctx ends.
func (s *Server) openACP(ctx context.Context, agent string) (io.ReadWriteCloser, error) {
	a, err := s.Store.Agent(ctx, agent)
	if err != nil {
		return nil, err
	}
	frontIn, toFront := io.Pipe()
	fromFront, frontOut := io.Pipe()
	// Ends with serveACP: with ctx, or as the dashboard closes its pipe.
	go func() {
		// The dashboard's sessions have no owner: no API token opened them.
		if err := s.serveACP(ctx, a, "", frontIn, frontOut); err != nil {
			s.log().Debug("the dashboard's ACP connection ended", "agent", a.Name, "err", err)
		}
		toFront.Close() // its reader ends
		frontOut.Close()
	}()
	return pipeConn{fromFront, toFront}, nil
}

// pipeConn is the dashboard's end of its connection: closing it ends the
// front end's input.
type pipeConn struct {
	*io.PipeReader
	*io.PipeWriter
}

func (p pipeConn) Close() error {
	p.PipeReader.Close()
	return p.PipeWriter.Close()
}
