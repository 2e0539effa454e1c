package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/interp"
)

// act does an action of a session (POST /v1/sessions/ID/actions/NAME,
// docs/server.md#actions): an action run on the session's runner, as the
// engine does it locally. The body is the action's arguments, a JSON
// object (none: no arguments). An action refused before it began is an
// error answer; else the answer's last line says how it went.
func (res *resources) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, "the body is larger than %d bytes", MaxBody)
		return
	}
	var args json.RawMessage
	if len(body) > 0 {
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
			fail(w, http.StatusBadRequest, "the body is the action's arguments, a JSON object, e.g. {\"stat\": true}")
			return
		}
		args = body
	}
	// The body is read: the server's read timeout would cancel the request
	// of an action that lasts longer.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if _, err := res.Store.Session(r.Context(), id); err != nil {
		failErr(w, err)
		return
	}
	out := &actionOutput{w: w}
	result, err := res.engine.Act(r.Context(), id, action, args, out)
	unknown := errors.Is(err, engine.ErrOutcomeUnknown)
	if err != nil && !out.started && !unknown {
		failErr(w, err) // refused before it began
		return
	}
	out.flush()
	last := api.ActionLine{Done: true}
	if err != nil {
		last.Error, last.Unknown = err.Error(), unknown
		res.Log.Warn("an action failed", "session", id, "action", action, "err", err)
	} else {
		last.Result = result.Result
	}
	out.line(last)
}

// actionOutput is the answer to an action: its output in lines of
// api.ActionLine, each flushed as it is written. The answer's status is
// sent with the first output, so that an action refused before it began
// is an error answer.
type actionOutput struct {
	w       http.ResponseWriter
	started bool
	partial []byte // the start of a character cut by a write
}

func (o *actionOutput) Write(b []byte) (int, error) {
	data := append(o.partial, b...)
	// A character cut between two writes goes whole in the next line.
	end := len(data)
	for i := 1; i <= utf8.UTFMax && i <= len(data); i++ {
		if utf8.RuneStart(data[len(data)-i]) {
			if !utf8.FullRune(data[len(data)-i:]) {
				end = len(data) - i
			}
			break
		}
	}
	o.partial = append([]byte(nil), data[end:]...)
	if end > 0 {
		if err := o.line(api.ActionLine{Output: string(data[:end])}); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush writes what is left of a cut character.
func (o *actionOutput) flush() {
	if len(o.partial) > 0 {
		_ = o.line(api.ActionLine{Output: string(o.partial)})
		o.partial = nil
	}
}

func (o *actionOutput) line(l api.ActionLine) error {
	if !o.started {
		o.started = true
		o.w.Header().Set("Content-Type", "application/x-ndjson")
		o.w.WriteHeader(http.StatusOK)
	}
	if err := json.NewEncoder(o.w).Encode(l); err != nil {
		return fmt.Errorf("the action's answer: %w", err)
	}
	// The output is seen as it comes, not when a buffer fills.
	return http.NewResponseController(o.w).Flush()
}

// Act does an action of a session for the dashboard, as act does it for
// the API.
func (res *resources) Act(ctx context.Context, id, action string, args json.RawMessage, out io.Writer) error {
	_, err := res.engine.Act(ctx, id, action, args, out)
	return err
}

// dashboardActions give the dashboard the actions of sessions: the
// runners say which a session offers, the engine does them.
type dashboardActions struct {
	*runners
	*resources
}

// checkArgs checks the arguments of the action of run, an action run,
// against the schema rc's hello gave the action: arguments it refuses
// are an *ArgsError, and the run is not started. An action the hello
// names otherwise (ID.NAME for NAME) or without a schema (a runner older
// than the server) is left for its run to check.
func (rc *runnerConn) checkArgs(run engine.Launch) error {
	for _, a := range rc.actions {
		if a.Name != run.Action || a.Schema == nil {
			continue
		}
		s, err := interp.ParseSchemaJSON(a.Schema)
		if err != nil {
			rc.runners.Log.Warn("an action's schema from a runner does not read; its run checks the arguments", "runner", rc.name, "action", a.Name, "err", err)
			return nil
		}
		if _, err := s.ValidateArgsJSON(run.ActionArgs); err != nil {
			return &ArgsError{Action: a.Name, Plug: a.Plug, Err: err}
		}
	}
	return nil
}

// ArgsError is the error of an action whose arguments its schema refuses,
// in the words of the action's run.
type ArgsError struct {
	Action, Plug string
	Err          error
}

func (e *ArgsError) Error() string {
	return fmt.Sprintf("action %s of plug %s: %v", e.Action, e.Plug, e.Err)
}

// problems are the arguments refused and what was wanted of each.
func (e *ArgsError) problems() []api.ArgProblem {
	var verr *interp.ValidationError
	if !errors.As(e.Err, &verr) {
		return nil
	}
	out := make([]api.ArgProblem, len(verr.Problems))
	for i, p := range verr.Problems {
		out[i] = api.ArgProblem{Path: p.Path, Problem: p.Msg}
	}
	return out
}
