package lifecycle

import (
	"encoding/json"
	"strings"
)

// ActionRun is the kind of a run that does one action a plug offers on the
// session's environment, without the agent (docs/plugs.md#actions). It
// leaves the session's record as it was: it is not counted among its runs.
const ActionRun Kind = "action"

// ControlAction reports the outcome of an action run in Action.
const ControlAction ControlKind = "action"

// ActionReport is how an action ended: the result its plug returned (JSON;
// empty for None), or its error.
type ActionReport struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Changes is the summary of the session's changes a plug reported.
	Changes *Changes `json:"changes,omitempty"`
}

// WithoutTraceback is a plug's error as people read it: its first line,
// without the Starlark traceback that follows (interp.Error), which the
// session process logs.
func WithoutTraceback(err string) string {
	first, _, _ := strings.Cut(err, "\nTraceback (most recent call last):")
	return first
}
