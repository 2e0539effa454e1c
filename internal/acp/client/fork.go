package client

import (
	"context"
	"fmt"
	"io"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// OpenForkOf opens the ACP session of a fork's first run over the run's
// stream (r, w: engine.Live.Stream): a fork of the conversation of parent,
// the session forked, when its agent offers session/fork, else a new one;
// fresh says why when it is new. r is closed as it returns. The command
// `sessions fork` and a server's fork both open forks with it.
func OpenForkOf(ctx context.Context, r io.ReadCloser, w io.Writer, parent *lifecycle.Record) (fresh string, err error) {
	conn := NewConn(r, w, nil)
	connCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	// Ends with connCtx, cancelled as OpenForkOf returns.
	go func() { defer close(ran); _ = conn.Run(connCtx) }()
	defer func() { cancel(); r.Close(); <-ran }()
	init, err := conn.Initialize(ctx, map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if err != nil {
		return "", err
	}
	cwd := parent.CWD
	if cwd == "" {
		cwd = parent.Dir
	}
	_, forked, err := conn.OpenFork(ctx, init, parent.ACPSessionID, cwd, parent.MCPServers)
	switch {
	case err != nil:
		return "", err
	case forked:
		return "", nil
	case parent.ACPSessionID == "":
		return fmt.Sprintf("session %s has no conversation with its agent to fork", parent.ID), nil
	}
	return fmt.Sprintf("its agent does not offer session/fork (ACP); session %s keeps its own", parent.ID), nil
}
