package chain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// ActionCall is the action an action run does (docs/plugs.md#actions).
type ActionCall struct {
	// Name is the action's name as asked: NAME, or ID.NAME.
	Name string
	// Args are its arguments as JSON: an object whose string values are
	// read by the schema's kind, as a command line gives them ("true" for
	// a bool); nil: none.
	Args json.RawMessage
	// Out receives what the plug writes with action.write, as it goes.
	Out io.Writer
}

// ActionOutcome is how an action run ended: the value its plug returned,
// as JSON (nil for None), or its error.
type ActionOutcome struct {
	Result json.RawMessage
	Err    error
	// Changes is the summary of the session's changes a plug reported.
	Changes *lifecycle.Changes
}

// act does the action of an action run: on_action of the plugs that define
// it, outermost first, down to the plug that offers the action, each
// passing it on with next() as on_teardown does. Every plug of the chain
// is loaded.
func (r *Run) act(host hosts.Host) ActionOutcome {
	call := r.opts.Action
	if call == nil {
		return ActionOutcome{Err: fmt.Errorf("an action run needs an action")}
	}
	offered, err := r.opts.Config.FindAction(call.Name)
	if err != nil {
		return ActionOutcome{Err: err}
	}
	args, err := actionArgs(offered, call.Args)
	if err != nil {
		return ActionOutcome{Err: err}
	}
	var order []int
	for i, p := range r.plugs {
		if p.use.Plug.OnAction != nil && i <= offered.Use.Index {
			order = append(order, i)
		}
	}
	var result starlark.Value = starlark.None
	if err := r.actStep(order, 0, offered, args, host, &result); err != nil {
		return ActionOutcome{Err: err}
	}
	if result == starlark.None {
		return ActionOutcome{}
	}
	data, err := interp.ToJSON(result)
	if err != nil {
		return ActionOutcome{Err: fmt.Errorf("action %s: plug %s returned what is not JSON-like: %w", offered.QualifiedName(), offered.Use.Name(), err)}
	}
	return ActionOutcome{Result: data}
}

// actStep calls on_action of the k-th plug of order; the last is the plug
// that offers the action, whose return value is the result.
func (r *Run) actStep(order []int, k int, offered interp.OfferedAction, args starlark.Value, host hosts.Host, result *starlark.Value) error {
	if k == len(order) {
		return nil
	}
	p := r.plugs[order[k]]
	mine := p.use == offered.Use
	// Every plug loads as in a run (its inputs, on_load: blaise:secrets
	// registers what the action's output is redacted of), on the host
	// where it sits: those before p here, and at the plug that offers the
	// action, every plug after it too.
	from, to := 0, order[k]
	if k > 0 {
		from = order[k-1] + 1
	}
	if mine {
		to = len(r.plugs) - 1
	}
	for i := from; i <= to; i++ {
		if err := r.load(r.plugs[i], host); err != nil {
			return err
		}
	}
	var innerErr error
	calls := 0
	next := r.nextBuiltin(p, &calls, host, func(h hosts.Host) starlark.Value {
		innerErr = r.actStep(order, k+1, offered, args, h, result)
		return starlark.None
	})
	a := &builtins.Action{Name: offered.Name, Plug: offered.Use.Plug.Name, PlugID: offered.Use.ID, Args: args, Mine: mine, Out: r.opts.Action.Out}
	defer a.Close()
	fn := p.use.Plug.OnAction
	c := r.newCtx(p, "on_action", host)
	v, err := r.call(p, "on_action", fn, c, starlark.Tuple{c, a, next})
	if innerErr != nil {
		return innerErr // the inner plug's failure, which it logged
	}
	if err != nil {
		return err
	}
	if mine {
		*result = v
		return nil
	}
	if calls == 0 {
		return r.handlerError(p, "on_action", fn, fmt.Sprintf("returned without calling next() for action %s of plug %s; pass on the actions of other plugs with next()", offered.Name, offered.Use.Name()))
	}
	return nil
}

// actionArgs validates the arguments of an action against its schema,
// reading the strings of a command line by the kind of their field.
func actionArgs(a interp.OfferedAction, raw json.RawMessage) (starlark.Value, error) {
	v, err := a.Args.ValidateArgsJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("action %s of plug %s: %w", a.QualifiedName(), a.Use.Name(), err)
	}
	return v, nil
}

// ActionArgs reads an action's arguments from a command line: --NAME is
// true, --no-NAME false, --NAME VALUE, --NAME=VALUE and NAME=VALUE the
// string VALUE, which the action's schema reads by the kind of its field;
// - in a name stands for _.
func ActionArgs(args []string) (map[string]any, error) {
	out := map[string]any{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		var v any = value
		switch {
		case hasValue:
		case strings.HasPrefix(a, "--no-"):
			name, v = strings.TrimPrefix(a, "--no-"), false
		case strings.HasPrefix(a, "--") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") && !strings.Contains(args[i+1], "="):
			i++
			v = args[i]
		case strings.HasPrefix(a, "--"):
			v = true
		default:
			return nil, fmt.Errorf("argument %q: an action's arguments are --NAME, --no-NAME, --NAME VALUE, --NAME=VALUE or NAME=VALUE", a)
		}
		name = strings.ReplaceAll(name, "-", "_")
		if name == "" {
			return nil, fmt.Errorf("argument %q has no name", a)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("argument %s is given twice", name)
		}
		out[name] = v
	}
	return out, nil
}
