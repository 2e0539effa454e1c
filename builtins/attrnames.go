package builtins

import (
	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"go.starlark.net/starlark"
)

// Blanks returns a value of each type that handlers receive, by type
// name, for editors: the language server completes their AttrNames, and
// reports an unknown attribute with the error a run would meet, by reading
// it from the blank value. Only AttrNames, and Attr of a name not among
// them, work on a blank.
func Blanks() map[string]starlark.HasAttrs {
	ctx := &Ctx{CtxBase: &CtxBase{}}
	return map[string]starlark.HasAttrs{
		"ctx":          ctx,
		"message":      &Message{},
		"host":         &Host{h: (*hostd.Client)(nil)}, // with forward, which some hosts have
		"fs":           &hostFS{},
		"process":      &process{},
		"PauseInfo":    &PauseInfo{},
		"TeardownInfo": &PauseInfo{Teardown: true},
		"persisted":    &persistedView{ctx: ctx},
		"log":          &Log{},
		"signal":       &Signal{},
		"agent":        &AgentDraft{},
	}
}
