package plugtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
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
