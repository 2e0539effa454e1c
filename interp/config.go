package interp

import (
	"fmt"
	"path/filepath"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/blaiseagent/blaise-agent/session"
)

// Config is a loaded blaise.star: the agent and the chain of plugs.
type Config struct {
	File  string // display name
	Dir   string // directory of the configuration
	Agent Agent
	Uses  []*Use
	// Session holds the lifecycle settings of session(...); zero values
	// are unset.
	Session SessionSettings
}

// SessionSettings are the lifecycle settings a configuration may set (L1).
type SessionSettings struct {
	IdlePolicy      string
	PausedLifetime  time.Duration
	InactivityLimit time.Duration
	Timeout         time.Duration
	Pos             syntax.Position
}

// Agent is the agent process as configured; plugs refine it through ctx.agent.
type Agent struct {
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	Pos     syntax.Position
}

// Use is one entry of setup(): a plug with its id and inputs.
type Use struct {
	Ref    string // as written
	Key    string // what it resolved to: a path, blaise:NAME, or a git+ reference at a commit
	ID     string // empty when not given
	Index  int    // position in setup, from 0
	Plug   *Plug
	Inputs *starlark.Dict // frozen; values may be functions of the run (C14)
	Static bool           // Inputs hold no function, so they were validated at load
	Pos    syntax.Position
}

// Name is how the use appears in messages: the plug name, with its id.
func (u *Use) Name() string {
	if u.ID != "" {
		return fmt.Sprintf("%s (id %s)", u.Plug.Name, u.ID)
	}
	return u.Plug.Name
}

// Resumable reports whether every plug of the chain can resume (C12).
func (c *Config) Resumable() bool {
	for _, u := range c.Uses {
		if !u.Plug.Resumable {
			return false
		}
	}
	return true
}

// useValue is what use(...) returns in blaise.star.
type useValue struct{ use *Use }

func (u *useValue) String() string        { return fmt.Sprintf("use(%q)", u.use.Ref) }
func (u *useValue) Type() string          { return "use" }
func (u *useValue) Freeze()               {}
func (u *useValue) Truth() starlark.Bool  { return true }
func (u *useValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: use") }

// ConfigNames are the names a configuration sees besides those of every
// file (Loader.FilePredeclared): LoadConfig predeclares these.
var ConfigNames = []string{"agent", "session", "setup", "use"}

// LoadConfig loads the configuration at path and every plug and module it
// reaches. Errors are *Error values naming file:line.
func (l *Loader) LoadConfig(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cfg := &Config{File: displayName(abs), Dir: filepath.Dir(abs)}
	l.lockDir = cfg.Dir
	var agentSet, setupSet bool
	ids := map[string]*Use{}

	agentFn := starlark.NewBuiltin("agent", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if agentSet {
			return nil, fmt.Errorf("agent() called twice: first at %s", cfg.Agent.Pos)
		}
		var argList *starlark.List
		var env *starlark.Dict
		a := Agent{}
		if err := starlark.UnpackArgs("agent", args, kwargs, "command", &a.Command, "args?", &argList, "env?", &env, "cwd?", &a.Cwd); err != nil {
			return nil, err
		}
		if a.Command == "" {
			return nil, fmt.Errorf("agent: command must not be empty")
		}
		if a.Args, err = stringList("agent: args", argList); err != nil {
			return nil, err
		}
		if a.Env, err = stringDict("agent: env", env); err != nil {
			return nil, err
		}
		a.Pos = thread.CallFrame(1).Pos
		cfg.Agent, agentSet = a, true
		return starlark.None, nil
	})

	useFn := starlark.NewBuiltin("use", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		u := &Use{Pos: thread.CallFrame(1).Pos}
		var inputs *starlark.Dict
		if err := starlark.UnpackArgs("use", args, kwargs, "ref", &u.Ref, "id?", &u.ID, "inputs?", &inputs); err != nil {
			return nil, err
		}
		if u.ID != "" {
			if err := session.CheckID("plug id", u.ID); err != nil {
				return nil, fmt.Errorf("use %q: %v", u.Ref, err)
			}
		}
		key, err := l.resolve(u.Ref, abs)
		if err != nil {
			return nil, fmt.Errorf("use %q: %v", u.Ref, err)
		}
		u.Plug, err = l.loadPlug(key)
		if err == nil {
			err = l.checkRemote(u.Ref, key)
		}
		if err != nil {
			return nil, fmt.Errorf("use %q: %w", u.Ref, err)
		}
		u.Key = key
		if inputs == nil {
			inputs = new(starlark.Dict)
		}
		for _, k := range inputs.Keys() {
			if _, ok := k.(starlark.String); !ok {
				return nil, fmt.Errorf("use %q: inputs: keys must be strings, got %s", u.Ref, k.Type())
			}
		}
		inputs.Freeze()
		u.Inputs = inputs
		if u.Plug.Persisted != nil && u.ID == "" {
			return nil, fmt.Errorf("plug %s declares persisted state, so it needs an id: use(%q, id = \"...\")", u.Plug.Name, u.Ref)
		}
		if u.Plug.Inputs == nil && inputs.Len() > 0 {
			return nil, fmt.Errorf("plug %s declares no inputs, but inputs are given", u.Plug.Name)
		}
		if !containsFunction(inputs) {
			u.Static = true
			if _, err := ValidateInputs(u, inputs); err != nil {
				return nil, err
			}
		}
		return &useValue{use: u}, nil
	})

	setupFn := starlark.NewBuiltin("setup", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if setupSet {
			return nil, fmt.Errorf("setup() called twice")
		}
		if len(kwargs) > 0 {
			return nil, fmt.Errorf("setup: unexpected keyword argument %s", kwargs[0][0])
		}
		for i, a := range args {
			uv, ok := a.(*useValue)
			if !ok {
				return nil, fmt.Errorf("setup: argument %d: want use(...), got %s", i+1, a.Type())
			}
			u := *uv.use
			u.Index = i
			if u.ID != "" {
				if first, dup := ids[u.ID]; dup {
					return nil, Errorf(u.Pos, "duplicate id %q: also used at %s", u.ID, first.Pos)
				}
				ids[u.ID] = &u
			}
			cfg.Uses = append(cfg.Uses, &u)
		}
		setupSet = true
		return starlark.None, nil
	})

	predeclared := l.withPlug()
	var sessionSet bool
	sessionFn := starlark.NewBuiltin("session", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if sessionSet {
			return nil, fmt.Errorf("session() called twice: first at %s", cfg.Session.Pos)
		}
		var policy, paused, inactivity, timeout string
		if err := starlark.UnpackArgs("session", args, kwargs, "idle_policy?", &policy, "paused_lifetime?", &paused, "inactivity_limit?", &inactivity, "timeout?", &timeout); err != nil {
			return nil, err
		}
		if policy != "" && policy != string(session.PolicyPause) && policy != string(session.PolicyEnd) {
			return nil, fmt.Errorf("session: idle_policy: want \"pause\" or \"end\", got %q", policy)
		}
		st := SessionSettings{IdlePolicy: policy, Pos: thread.CallFrame(1).Pos}
		for _, d := range []struct {
			name, text string
			dst        *time.Duration
		}{{"paused_lifetime", paused, &st.PausedLifetime}, {"inactivity_limit", inactivity, &st.InactivityLimit}, {"timeout", timeout, &st.Timeout}} {
			if d.text == "" {
				continue
			}
			v, err := ParseSettingDuration(d.text)
			if err != nil {
				return nil, fmt.Errorf("session: %s: %w", d.name, err)
			}
			*d.dst = v
		}
		cfg.Session, sessionSet = st, true
		return starlark.None, nil
	})
	own := starlark.StringDict{"agent": agentFn, "setup": setupFn, "use": useFn, "session": sessionFn}
	for _, name := range ConfigNames {
		predeclared[name] = own[name]
	}
	if _, err := l.load(abs, configFile, predeclared, nil); err != nil {
		return nil, err
	}
	if !agentSet {
		return nil, &Error{Pos: syntax.MakePosition(&cfg.File, 1, 1), Msg: "no agent: call agent(command = ...)"}
	}
	return cfg, nil
}

// ParseSettingDuration reads a duration of the session settings, in
// session(...) and in the flags that set them alike: a positive one, such
// as "90s".
func ParseSettingDuration(text string) (time.Duration, error) {
	v, err := time.ParseDuration(text)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("want a positive duration such as \"90s\", \"30m\" or \"24h\", got %q", text)
	}
	return v, nil
}

// loadPlug loads the plug file with key.
func (l *Loader) loadPlug(key string) (*Plug, error) {
	var slot *Plug
	m, err := l.load(key, plugFile, l.withPlug(), bindPlugSlot(&slot))
	if err != nil {
		return nil, err
	}
	return m.plug, nil
}

// ValidateInputs validates evaluated inputs against the plug's schema (C14).
func ValidateInputs(u *Use, inputs *starlark.Dict) (starlark.Value, error) {
	if u.Plug.Inputs == nil {
		return NewRecord(nil, nil).WithName("inputs"), nil
	}
	v, err := u.Plug.Inputs.Validate(inputs, "inputs")
	if err != nil {
		return nil, fmt.Errorf("plug %s: %w", u.Plug.Name, err)
	}
	return v, nil
}

// containsFunction reports whether v holds a callable anywhere.
func containsFunction(v starlark.Value) bool {
	switch v := v.(type) {
	case starlark.Callable:
		return true
	case *starlark.Dict:
		for _, item := range v.Items() {
			if containsFunction(item[1]) {
				return true
			}
		}
	case *starlark.List:
		for i := 0; i < v.Len(); i++ {
			if containsFunction(v.Index(i)) {
				return true
			}
		}
	case starlark.Tuple:
		for _, x := range v {
			if containsFunction(x) {
				return true
			}
		}
	}
	return false
}

func stringList(what string, l *starlark.List) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	out := make([]string, l.Len())
	for i := range out {
		s, ok := starlark.AsString(l.Index(i))
		if !ok {
			return nil, fmt.Errorf("%s[%d]: want string, got %s", what, i, l.Index(i).Type())
		}
		out[i] = s
	}
	return out, nil
}

func stringDict(what string, d *starlark.Dict) (map[string]string, error) {
	out := map[string]string{}
	if d == nil {
		return out, nil
	}
	for _, item := range d.Items() {
		k, ok := starlark.AsString(item[0])
		if !ok {
			return nil, fmt.Errorf("%s: keys must be strings, got %s", what, item[0].Type())
		}
		v, ok := starlark.AsString(item[1])
		if !ok {
			return nil, fmt.Errorf("%s[%q]: want string, got %s", what, k, item[1].Type())
		}
		out[k] = v
	}
	return out, nil
}
