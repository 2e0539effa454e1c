package builtins

import (
	"testing"

	"go.starlark.net/starlark"
)

// TestHandlesKeepTheirTruthAndHashErrors: the values that share their
// Freeze, Truth and Hash (interp.Opaque, interp.Inert, interp.Unhashable)
// are true, and their hash errors keep their words.
func TestHandlesKeepTheirTruthAndHashErrors(t *testing.T) {
	for _, test := range []struct {
		v    starlark.Value
		want string
	}{
		{&Action{}, "unhashable: action"},
		{&AgentDraft{}, "unhashable: agent"},
		{&Ctx{}, "unhashable: ctx"},
		{&Setup{}, "unhashable: setup"},
		{&Signal{}, "unhashable: signal"},
		{&Host{}, "unhashable type: host"},
		{&hostFS{}, "unhashable type: fs"},
		{&Log{}, "unhashable: log"},
		{&Message{}, "unhashable: message"},
		{&RequestError{Data: starlark.None}, "unhashable: request_error"},
		{&PauseInfo{}, "unhashable: PauseInfo"},
		{&PauseInfo{Teardown: true}, "unhashable: TeardownInfo"},
		{&persistedView{}, "unhashable: persisted"},
		{&process{}, "unhashable type: process"},
		{&Match{}, "unhashable: re.match"},
		{&Redactor{}, "unhashable: redactor"},
		{&RedactStream{}, "unhashable: redact_stream"},
	} {
		if !test.v.Truth() {
			t.Errorf("%s is false", test.v.Type())
		}
		if _, err := test.v.Hash(); err == nil || err.Error() != test.want {
			t.Errorf("%s's hash: %v, want %q", test.v.Type(), err, test.want)
		}
	}
}
