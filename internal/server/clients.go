package server

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/front"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/charmbracelet/log"
	"github.com/coder/websocket"
)

// clients serve the ACP front end of the agents to their clients: over a
// WebSocket, and to the dashboard in this process.
type clients struct {
	Store  *sqlstore.Store
	Log    *log.Logger
	engine *engine.Engine
	// version is blaise-agent's, as the front end tells it.
	version string
}

// connect serves ACP to a client of an agent: the same front end as
// `blaise-agent acp`, over a WebSocket.
func (c *clients) connect(ctx context.Context, w http.ResponseWriter, r *http.Request, every time.Duration) {
	a, err := c.Store.Agent(ctx, r.PathValue("name"))
	if err != nil {
		failErr(w, err)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{api.ACPSubprotocol}})
	if err != nil {
		return
	}
	ws.SetReadLimit(-1)
	nc := runnerproto.Coalesce(websocket.NetConn(ctx, ws, websocket.MessageBinary), nil)
	defer nc.Close()
	kctx, stop := context.WithCancel(ctx)
	var kept sync.WaitGroup
	defer kept.Wait()
	defer stop()
	kept.Go(func() { keepAlive(kctx, ws, every) })
	if err := c.serve(ctx, a, owner(r), nc, nc); err != nil {
		c.Log.Debug("a client's connection ended", "agent", a.Name, "err", err)
	}
}

// serve serves the ACP front end of agent a to one client, whose API
// token is owner's, reading its messages from in and writing to out, until
// in ends or ctx does; then the client's sessions stop as idle (L9).
func (c *clients) serve(ctx context.Context, a *sqlstore.Agent, owner string, in io.Reader, out io.Writer) error {
	front := &front.Server{
		Sessions: front.ForAgent(c.engine, a.Name, owner, a.Settings),
		// No Config: each runner loads its own, and a session records the
		// one of the runner that runs it (Launch).
		In:      in,
		Out:     out,
		Log:     c.Log.With("agent", a.Name),
		Version: c.version,
	}
	return front.Run(ctx)
}

// open connects the dashboard, in this process, to the ACP front end
// of an agent: the one GET /v1/agents/NAME/acp serves over a WebSocket.
// The connection lasts until the dashboard closes it or ctx ends.
func (c *clients) open(ctx context.Context, agent string) (io.ReadWriteCloser, error) {
	a, err := c.Store.Agent(ctx, agent)
	if err != nil {
		return nil, err
	}
	frontIn, toFront := io.Pipe()
	fromFront, frontOut := io.Pipe()
	// Ends with serve: with ctx, or as the dashboard closes its pipe.
	go func() {
		// The dashboard's sessions have no owner: no API token opened them.
		if err := c.serve(ctx, a, "", frontIn, frontOut); err != nil {
			c.Log.Debug("the dashboard's ACP connection ended", "agent", a.Name, "err", err)
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

// keepAlive pings a client's WebSocket every interval (Server.KeepAlive)
// until it closes; a peer that does not answer within it is cut.
func keepAlive(ctx context.Context, ws *websocket.Conn, every time.Duration) {
	if every <= 0 {
		every = DefaultKeepAlive
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := ws.Ping(pctx)
		cancel()
		if err != nil {
			ws.CloseNow()
			return
		}
	}
}
