package builtins

import (
	"testing"

	"github.com/charmbracelet/log"
)

// TestM6_TakingFromCtxWhatOutlivesTheCallIsTold: every attribute of ctx
// but log and plug tells Reached, since a value the handler sees could be
// kept through it; log and plug do not.
func TestM6_TakingFromCtxWhatOutlivesTheCallIsTold(t *testing.T) {
	for _, name := range ctxAttrs {
		var reached bool
		c := &Ctx{CtxBase: &CtxBase{PlugName: "p", Logger: log.New(nil)}, Handler: "on_message", Reached: &reached}
		_, _ = c.Attr(name)
		if want := name != "log" && name != "plug"; reached != want {
			t.Errorf("ctx.%s: reached %v, want %v", name, reached, want)
		}
	}
}
