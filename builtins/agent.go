package builtins

import (
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/starlark"

	"github.com/blaiseagent/blaise-agent/interp"
)

// AgentDraft is ctx.agent: the agent process being prepared. Each plug sees
// its own draft; next() freezes it and hands a copy to the inner plugs (C5),
// so a plug cannot change the agent once the agent may have started.
type AgentDraft struct {
	interp.Opaque[*AgentDraft]

	Command string
	Cwd     string
	Args    *starlark.List
	Env     *starlark.Dict
	owner   string // plug name, for the frozen error
	frozen  bool
	where   string // the handler where ctx.agent is read-only, if any
}

var (
	_          starlark.HasSetField = (*AgentDraft)(nil)
	agentAttrs                      = []string{"args", "command", "cwd", "env"}
)

// NewAgentDraft makes a draft from the configuration's agent.
func NewAgentDraft(command string, args []string, env map[string]string, cwd string) *AgentDraft {
	list := starlark.NewList(nil)
	for _, a := range args {
		_ = list.Append(starlark.String(a))
	}
	dict := starlark.NewDict(len(env))
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_ = dict.SetKey(starlark.String(k), starlark.String(env[k]))
	}
	return &AgentDraft{Command: command, Cwd: cwd, Args: list, Env: dict}
}

// For returns a copy that plug owner may change until it is frozen.
func (a *AgentDraft) For(owner string) *AgentDraft {
	c := &AgentDraft{Command: a.Command, Cwd: a.Cwd, owner: owner}
	c.Args = starlark.NewList(nil)
	for i := 0; i < a.Args.Len(); i++ {
		_ = c.Args.Append(a.Args.Index(i))
	}
	c.Env = starlark.NewDict(a.Env.Len())
	for _, item := range a.Env.Items() {
		_ = c.Env.SetKey(item[0], item[1])
	}
	return c
}

// ReadOnlyIn freezes the draft of a handler other than on_session, where
// the agent cannot be shaped at all.
func (a *AgentDraft) ReadOnlyIn(handler string) *AgentDraft {
	a.Freeze()
	a.where = handler
	return a
}

// Freeze makes the draft read-only (C5).
func (a *AgentDraft) Freeze() {
	a.frozen = true
	a.Args.Freeze()
	a.Env.Freeze()
}

// readOnly is the error of changing field name of a draft that cannot
// change, or nil.
func (a *AgentDraft) readOnly(name string) error {
	if a.where != "" {
		return fmt.Errorf("ctx.agent.%s is read-only in %s: shape the agent in on_session, before calling next()", name, a.where)
	}
	if a.frozen {
		return fmt.Errorf("ctx.agent.%s cannot change after next(): plug %s already started the inner plugs and the agent; set ctx.agent before calling next()", name, a.owner)
	}
	return nil
}

// FrozenChange explains err, the error of a handler, when it is Starlark's
// refusal to change a frozen list or dict and the draft is read-only: the
// handler changed ctx.agent.args or ctx.agent.env (a plug's globals are
// frozen too, so the line that failed must name ctx.agent). It returns ""
// otherwise.
func (a *AgentDraft) FrozenChange(err error, line string) string {
	if a == nil || !a.frozen && a.where == "" || !strings.Contains(line, "agent") {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "frozen hash table"):
		return a.readOnly("env").Error()
	case strings.Contains(msg, "frozen list"):
		return a.readOnly("args").Error()
	}
	return ""
}

// Spec checks the draft and returns the process it describes.
func (a *AgentDraft) Spec() (argv []string, env map[string]string, cwd string, err error) {
	if a.Command == "" {
		return nil, nil, "", fmt.Errorf("ctx.agent.command is empty")
	}
	argv = []string{a.Command}
	for i := 0; i < a.Args.Len(); i++ {
		s, ok := starlark.AsString(a.Args.Index(i))
		if !ok {
			return nil, nil, "", fmt.Errorf("ctx.agent.args[%d]: want string, got %s", i, a.Args.Index(i).Type())
		}
		argv = append(argv, s)
	}
	env = make(map[string]string, a.Env.Len())
	for _, item := range a.Env.Items() {
		k, ok1 := starlark.AsString(item[0])
		v, ok2 := starlark.AsString(item[1])
		if !ok1 || !ok2 {
			return nil, nil, "", fmt.Errorf("ctx.agent.env: want string keys and values, got %s: %s", item[0].Type(), item[1].Type())
		}
		env[k] = v
	}
	return argv, env, a.Cwd, nil
}

func (a *AgentDraft) String() string {
	return fmt.Sprintf("agent(command = %q, args = %s, env = %s, cwd = %q)", a.Command, a.Args, a.Env, a.Cwd)
}
func (a *AgentDraft) Type() string        { return "agent" }
func (a *AgentDraft) AttrNames() []string { return agentAttrs }

func (a *AgentDraft) Attr(name string) (starlark.Value, error) {
	switch name {
	case "command":
		return starlark.String(a.Command), nil
	case "cwd":
		if a.Cwd == "" {
			return starlark.None, nil
		}
		return starlark.String(a.Cwd), nil
	case "args":
		return a.Args, nil
	case "env":
		return a.Env, nil
	}
	return nil, noSuchAttr("ctx.agent", name, agentAttrs)
}

func (a *AgentDraft) SetField(name string, v starlark.Value) error {
	if err := a.readOnly(name); err != nil {
		return err
	}
	switch name {
	case "command", "cwd":
		s, ok := starlark.AsString(v)
		if !ok && !(name == "cwd" && v == starlark.None) {
			return fmt.Errorf("ctx.agent.%s: want string, got %s", name, v.Type())
		}
		if name == "command" {
			a.Command = s
		} else {
			a.Cwd = s
		}
	case "args":
		l, ok := v.(*starlark.List)
		if !ok {
			if t, isTuple := v.(starlark.Tuple); isTuple {
				l = starlark.NewList(append([]starlark.Value(nil), t...))
			} else {
				return fmt.Errorf("ctx.agent.args: want list of strings, got %s", v.Type())
			}
		}
		for i := 0; i < l.Len(); i++ {
			if _, ok := starlark.AsString(l.Index(i)); !ok {
				return fmt.Errorf("ctx.agent.args[%d]: want string, got %s", i, l.Index(i).Type())
			}
		}
		a.Args = l
	case "env":
		d, ok := v.(*starlark.Dict)
		if !ok {
			return fmt.Errorf("ctx.agent.env: want dict of strings, got %s", v.Type())
		}
		a.Env = d
	default:
		return noSuchAttr("ctx.agent", name, agentAttrs)
	}
	return nil
}
