package interp

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// APIVersion is the plug API version stamped on every plug (PLUG_API_VERSION).
const APIVersion = 1

// Plug is a plug file's definition: what plug(...) declared and the
// handlers the file defines.
type Plug struct {
	Name        string
	Description string
	Inputs      *Schema // nil: the plug takes no inputs
	Persisted   *Schema // nil: the plug keeps no persisted state
	Resumable   bool
	// Extensions: on_message also sees extension methods ("_…"), which
	// the SDK does not type and which pass other plugs untouched (M2).
	Extensions bool
	APIVersion int
	File       string          // display name of the file
	Pos        syntax.Position // of the plug(...) call
	// Warnings are mistakes that do not stop the plug from loading, such
	// as an on_message that can end without a return; check shows them.
	Warnings []*Error
	// Mistakes are what is certainly wrong in the handlers' code on the
	// paths that have it, such as next() called twice: check reports them
	// as errors; a run fails at them only when it takes such a path.
	Mistakes []*Error
	// OnMessageFallsThrough are the statements after which on_message can
	// end without a return, named when a request gets None at run time.
	OnMessageFallsThrough []syntax.Position
	// Actions are the named actions the plug offers on its session's
	// environment (action runs, docs/plugs.md#actions): each an object
	// schema of its arguments, whose doc says what it does.
	Actions map[string]*Schema

	OnSession  *starlark.Function
	OnTeardown *starlark.Function
	OnMessage  *starlark.Function
	OnLoad     *starlark.Function
	OnMigrate  *starlark.Function
	OnAction   *starlark.Function
}

// handlerSpec lists the handler names and their parameters.
var handlerSpec = []struct {
	name   string
	params []string
	field  func(*Plug) **starlark.Function
}{
	{"on_session", []string{"ctx", "next"}, func(p *Plug) **starlark.Function { return &p.OnSession }},
	{"on_teardown", []string{"ctx", "next"}, func(p *Plug) **starlark.Function { return &p.OnTeardown }},
	{"on_message", []string{"ctx", "message", "next"}, func(p *Plug) **starlark.Function { return &p.OnMessage }},
	{"on_load", []string{"ctx"}, func(p *Plug) **starlark.Function { return &p.OnLoad }},
	{"on_migrate", []string{"ctx", "stored"}, func(p *Plug) **starlark.Function { return &p.OnMigrate }},
	{"on_action", []string{"ctx", "action", "next"}, func(p *Plug) **starlark.Function { return &p.OnAction }},
}

// HandlerNames are the names of the functions a plug may define.
var HandlerNames = func() []string {
	names := make([]string, len(handlerSpec))
	for i, h := range handlerSpec {
		names[i] = h.name
	}
	return names
}()

const plugKey = "blaise.plug"

// plugBuiltin implements plug(name=, description=, inputs=, persisted=,
// resumable=True, extensions=False, actions=).
var plugBuiltin = starlark.NewBuiltin("plug", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	slot, ok := thread.Local(plugKey).(**Plug)
	if !ok {
		return nil, fmt.Errorf("plug() may only be called in a plug file, not in a configuration or a module for load()")
	}
	if *slot != nil {
		return nil, fmt.Errorf("plug() called twice: first at %s", (*slot).Pos)
	}
	if thread.CallStackDepth() != 2 {
		return nil, fmt.Errorf("plug() must be called at the top level of the file")
	}
	p := &Plug{Resumable: true, APIVersion: APIVersion}
	var inputs, persisted, actions starlark.Value = starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs("plug", args, kwargs,
		"name", &p.Name,
		"description?", &p.Description,
		"inputs?", &inputs,
		"persisted?", &persisted,
		"resumable?", &p.Resumable,
		"extensions?", &p.Extensions,
		"actions?", &actions,
	); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Name) == "" {
		return nil, fmt.Errorf("plug: name must not be empty")
	}
	var err error
	if p.Inputs, err = optionalSchema("inputs", inputs); err != nil {
		return nil, err
	}
	if p.Persisted, err = optionalSchema("persisted", persisted); err != nil {
		return nil, err
	}
	if p.Actions, err = actionSchemas(actions); err != nil {
		return nil, err
	}
	p.Pos = thread.CallFrame(1).Pos
	*slot = p
	return starlark.None, nil
})

func optionalSchema(field string, v starlark.Value) (*Schema, error) {
	if v == starlark.None {
		return nil, nil
	}
	s, ok := v.(*Schema)
	if !ok {
		return nil, fmt.Errorf("plug: %s: want a schema (schema.object(...)), got %s", field, v.Type())
	}
	return s, nil
}

// bindPlugSlot prepares a thread to receive the plug(...) declaration.
func bindPlugSlot(slot **Plug) func(*starlark.Thread) {
	return func(thread *starlark.Thread) { thread.SetLocal(plugKey, slot) }
}

// finishPlug checks the declaration and finds the handlers among globals.
func finishPlug(thread *starlark.Thread, key string, globals starlark.StringDict) (*Plug, error) {
	slot, _ := thread.Local(plugKey).(**Plug)
	if slot == nil || *slot == nil {
		return nil, &Error{
			Pos:   syntax.MakePosition(ptr(displayName(key)), 1, 1),
			Msg:   "not a plug: the file never calls plug(name = ...)",
			cause: ErrNotAPlug,
		}
	}
	p := *slot
	p.File = displayName(key)
	var errs Errors
	for _, h := range handlerSpec {
		v, ok := globals[h.name]
		if !ok {
			continue
		}
		fn, ok := v.(*starlark.Function)
		if !ok {
			errs = append(errs, &Error{Pos: p.Pos, Plug: p.Name, Msg: fmt.Sprintf("%s must be a function, got %s", h.name, v.Type())})
			continue
		}
		if err := checkArity(fn, h.name, h.params); err != nil {
			errs = append(errs, &Error{Pos: fn.Position(), Plug: p.Name, Msg: err.Error()})
			continue
		}
		*h.field(p) = fn
	}
	names := make([]string, 0, len(globals))
	for name := range globals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasPrefix(name, "on_") || slices.Contains(HandlerNames, name) {
			continue
		}
		if near := Nearest(name, HandlerNames); near != "" {
			pos := p.Pos
			if fn, ok := globals[name].(*starlark.Function); ok {
				pos = fn.Position()
			}
			errs = append(errs, &Error{Pos: pos, Plug: p.Name, Msg: fmt.Sprintf("%s is not a handler name (did you mean %s?)", name, near)})
		}
	}
	if p.Extensions && p.OnMessage == nil && globals["on_message"] == nil {
		errs = append(errs, &Error{Pos: p.Pos, Plug: p.Name, Msg: "extensions = True needs an on_message handler to see them"})
	}
	if len(p.Actions) > 0 && p.OnAction == nil && globals["on_action"] == nil {
		errs = append(errs, &Error{Pos: p.Pos, Plug: p.Name, Msg: "actions = {...} needs an on_action(ctx, action, next) handler that does them"})
	}
	if _, ok := globals["on_migrate"]; ok && p.Persisted == nil {
		pos := p.Pos
		if fn, ok := globals["on_migrate"].(*starlark.Function); ok {
			pos = fn.Position()
		}
		errs = append(errs, &Error{Pos: pos, Plug: p.Name, Msg: "on_migrate needs persisted = schema... in plug()"})
	}
	return p, errs.err()
}

// checkArity reports whether fn can be called with exactly the given
// positional parameters.
func checkArity(fn *starlark.Function, name string, params []string) error {
	n := len(params)
	positional := fn.NumParams() - fn.NumKwonlyParams()
	if fn.HasVarargs() {
		positional--
	}
	if fn.HasKwargs() {
		positional--
	}
	required := 0
	for i := 0; i < positional; i++ {
		if fn.ParamDefault(i) == nil {
			required++
		}
	}
	for i := positional; i < fn.NumParams()-btoi(fn.HasVarargs())-btoi(fn.HasKwargs()); i++ {
		if fn.ParamDefault(i) == nil {
			return fmt.Errorf("%s must take (%s): its keyword-only parameter has no default", name, strings.Join(params, ", "))
		}
	}
	if required <= n && (positional >= n || fn.HasVarargs()) {
		return nil
	}
	return fmt.Errorf("%s must take %d parameters (%s), takes %d", name, n, strings.Join(params, ", "), positional)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

// Handlers lists the names of the handlers p defines, in a fixed order.
func (p *Plug) Handlers() []string {
	var out []string
	for _, h := range handlerSpec {
		if *h.field(p) != nil {
			out = append(out, h.name)
		}
	}
	return out
}
