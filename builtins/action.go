package builtins

import (
	"fmt"
	"io"
	"sync/atomic"

	"go.starlark.net/starlark"

	"github.com/blaiseagent/blaise-agent/interp"
)

// Action is the action value of an on_action call (docs/plugs.md#actions):
// the action asked for, its validated arguments, whether the called plug
// is the one that offers it, and write(), which prints to the person as
// the action goes.
type Action struct {
	interp.Opaque[*Action]

	Name   string
	Plug   string // the name of the plug that offers it
	PlugID string // and its id, "" when setup gives none
	Args   starlark.Value
	Mine   bool      // the called plug offers it
	Out    io.Writer // where write() goes
	closed atomic.Bool
}

var _ starlark.HasAttrs = (*Action)(nil)

// Close ends the handler call: write() fails after it.
func (a *Action) Close() { a.closed.Store(true) }

func (a *Action) String() string { return fmt.Sprintf("action(name = %q, plug = %q)", a.Name, a.Plug) }
func (a *Action) Type() string   { return "action" }

var actionAttrs = []string{"args", "mine", "name", "plug", "plug_id", "write"}

func (a *Action) AttrNames() []string { return actionAttrs }

func (a *Action) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(a.Name), nil
	case "plug":
		return starlark.String(a.Plug), nil
	case "plug_id":
		if a.PlugID == "" {
			return starlark.None, nil
		}
		return starlark.String(a.PlugID), nil
	case "args":
		return a.Args, nil
	case "mine":
		return starlark.Bool(a.Mine), nil
	case "write":
		return starlark.NewBuiltin("action.write", a.write), nil
	}
	return nil, noSuchAttr("action", name, actionAttrs)
}

// write(text) prints text to the person who asked for the action, as it
// is: a line wants its "\n".
func (a *Action) write(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var text string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "text", &text); err != nil {
		return nil, err
	}
	if a.closed.Load() {
		return nil, fmt.Errorf("action.write: the on_action call that got this action has returned")
	}
	if a.Out == nil {
		return starlark.None, nil
	}
	if _, err := io.WriteString(a.Out, text); err != nil {
		return nil, fmt.Errorf("action.write: the person who asked for the action is gone: %w", err)
	}
	return starlark.None, nil
}
