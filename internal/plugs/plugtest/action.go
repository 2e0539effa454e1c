package plugtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
)

// leadingDos counts the do lines that begin a run's script.
func leadingDos(actions []Action) int {
	n := 0
	for n < len(actions) && actions[n].Verb == "do" {
		n++
	}
	return n
}

// act runs the do lines of r, each an action run on the paused session
// id, and writes what each printed and returned, or its error, to the
// run's action section.
func (w *workDir) act(ctx context.Context, e *engine.Engine, id string, r *Run, got Got) error {
	var out bytes.Buffer
	for _, a := range r.Actions[:leadingDos(r.Actions)] {
		fields := strings.Fields(a.Arg)
		fmt.Fprintf(&out, "do %s\n", a.Arg)
		args, err := chain.ActionArgs(fields[1:])
		if err != nil {
			return &ErrorAt{w.file.Path, a.Line, err.Error()}
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return err
		}
		var printed bytes.Buffer
		res, err := e.Act(ctx, id, fields[0], raw, &printed)
		out.Write(printed.Bytes())
		if n := printed.Len(); n > 0 && printed.Bytes()[n-1] != '\n' {
			out.WriteString("\n")
		}
		switch {
		case err != nil:
			fmt.Fprintf(&out, "error: %v\n", err)
		case res.Result != nil:
			fmt.Fprintf(&out, "result: %s\n", res.Result)
		}
	}
	got[fmt.Sprintf("want/run%d/action", r.Number)] = out.Bytes()
	return nil
}

// fork runs a fork line: the paused session parent is forked as sessions
// fork does, its client opening the fork's ACP session with session/fork,
// which the scripted agent offers in this run alone (the other runs'
// transcripts show its initialize as ever). It returns the fork's record,
// paused, or when the fork failed the parent's, as it was: the client
// section says which.
func (w *workDir) fork(ctx context.Context, e *engine.Engine, parent string, r *Run, got Got) (*lifecycle.Record, error) {
	if err := os.WriteFile(w.path("agent", "script.json"), []byte("[]"), 0o644); err != nil {
		return nil, err
	}
	agent := e.Agent
	e.Agent = append(slices.Clone(agent), "--fork")
	defer func() { e.Agent = agent }()
	out := &syncBuffer{}
	rec, err := e.Fork(ctx, parent, func(l *engine.Live) error {
		prec, err := e.Store.Session(ctx, parent)
		if err != nil {
			return err
		}
		w.ids = append(w.ids, l.ID)
		c := newClient(l, out, w.path("host"))
		defer c.close()
		init, err := c.conn.Initialize(ctx, map[string]any{"protocolVersion": 1, "clientCapabilities": c.Capabilities()})
		if err != nil {
			return err
		}
		if _, forked, err := c.conn.OpenFork(ctx, init, prec.ACPSessionID, c.Root, prec.MCPServers); err != nil || forked {
			return err
		}
		c.Notice("· the fork's conversation starts afresh: the session forked has none")
		return nil
	})
	client := fmt.Sprintf("want/run%d/client", r.Number)
	if err != nil {
		fmt.Fprintf(out, "· the fork failed: %v\n", err)
		got[client], _ = out.Since(0)
		return e.Store.Session(ctx, parent)
	}
	fmt.Fprintf(out, "· forked from %s\n", parent)
	got[client], _ = out.Since(0)
	return rec, nil
}
