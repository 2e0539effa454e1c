package interp

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
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
type useValue struct {
	Opaque[*useValue]

	use    *Use
	failed bool // a mistake was recorded: setup() leaves it out
}

func (u *useValue) String() string { return fmt.Sprintf("use(%q)", u.use.Ref) }
func (u *useValue) Type() string   { return "use" }

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
	var agentSet, agentFailed, setupSet bool
	var setupPos syntax.Position // of the first setup()
	ids := map[string]*Use{}
	// Every builtin records its mistakes and lets the file go on, so that
	// one pass finds every mistake that does not follow from another.
	var errs Errors
	reported := map[string]bool{} // plugs whose own mistakes are in errs
	var tree *syntax.File         // of the configuration, parsed when a mistake needs it
	syntaxOf := func() *syntax.File {
		if tree == nil {
			if src, err := l.read(abs); err == nil {
				tree, _ = FileOptions.Parse(cfg.File, src, 0)
			}
		}
		return tree
	}

	agentFn := recording("agent", &errs, func(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) error {
		if agentSet {
			return fmt.Errorf("agent() called twice: first at %s", cfg.Agent.Pos)
		}
		agentFailed = true
		var argList *starlark.List
		var env *starlark.Dict
		a := Agent{}
		if err := starlark.UnpackArgs("agent", args, kwargs, "command", &a.Command, "args?", &argList, "env?", &env, "cwd?", &a.Cwd); err != nil {
			return err
		}
		if a.Command == "" {
			return fmt.Errorf("agent: command must not be empty")
		}
		if a.Args, err = stringList("agent: args", argList); err != nil {
			return err
		}
		if a.Env, err = stringDict("agent: env", env); err != nil {
			return err
		}
		a.Pos = thread.CallFrame(1).Pos
		cfg.Agent, agentSet, agentFailed = a, true, false
		return nil
	})

	useFn := starlark.NewBuiltin("use", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		u := &Use{Pos: thread.CallFrame(1).Pos}
		n := len(errs)
		l.use(u, args, kwargs, abs, reported, syntaxOf, &errs)
		return &useValue{use: u, failed: len(errs) > n}, nil
	})

	setupFn := recording("setup", &errs, func(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) error {
		if setupSet {
			return fmt.Errorf("setup() called twice: first at %s", setupPos)
		}
		setupSet, setupPos = true, thread.CallFrame(1).Pos
		if len(kwargs) > 0 {
			return fmt.Errorf("setup: unexpected keyword argument %s", kwargs[0][0])
		}
		for i, a := range args {
			uv, ok := a.(*useValue)
			if !ok {
				errs.add(fmt.Errorf("setup: argument %d: want use(...), got %s", i+1, a.Type()), thread.CallFrame(1).Pos)
				continue
			}
			u := *uv.use
			u.Index = i
			if u.ID != "" {
				if first, dup := ids[u.ID]; dup {
					errs.add(Errorf(u.Pos, "duplicate id %q: also used at %s", u.ID, first.Pos), u.Pos)
					continue
				}
				ids[u.ID] = &u
			}
			if !uv.failed {
				cfg.Uses = append(cfg.Uses, &u)
			}
		}
		return nil
	})

	predeclared := l.withPlug()
	var sessionSet bool
	sessionFn := recording("session", &errs, func(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) error {
		if sessionSet {
			return fmt.Errorf("session() called twice: first at %s", cfg.Session.Pos)
		}
		var policy, paused, inactivity, timeout string
		if err := starlark.UnpackArgs("session", args, kwargs, "idle_policy?", &policy, "paused_lifetime?", &paused, "inactivity_limit?", &inactivity, "timeout?", &timeout); err != nil {
			return err
		}
		if policy != "" && policy != string(lifecycle.PolicyPause) && policy != string(lifecycle.PolicyEnd) {
			return fmt.Errorf("session: idle_policy: want \"pause\" or \"end\", got %q", policy)
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
				return fmt.Errorf("session: %s: %w", d.name, err)
			}
			*d.dst = v
		}
		cfg.Session, sessionSet = st, true
		return nil
	})
	own := starlark.StringDict{"agent": agentFn, "setup": setupFn, "use": useFn, "session": sessionFn}
	for _, name := range ConfigNames {
		predeclared[name] = own[name]
	}
	if _, err := l.load(abs, configFile, predeclared, nil); err != nil {
		errs.add(err, syntax.Position{})
	} else if !agentSet && !agentFailed {
		errs.add(&Error{Pos: syntax.MakePosition(&cfg.File, 1, 1), Msg: "no agent: call agent(command = ...)"}, syntax.Position{})
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// recording makes a builtin of a configuration that records its mistake,
// at the call, in errs and returns None, so that the file goes on.
func recording(name string, errs *Errors, fn func(*starlark.Thread, starlark.Tuple, []starlark.Tuple) error) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := fn(thread, args, kwargs); err != nil {
			errs.add(err, thread.CallFrame(1).Pos)
		}
		return starlark.None, nil
	})
}

// use fills u from the arguments of a use(...) call in the configuration
// at cfgKey, and records in errs each mistake of the call, of its plug
// (unless reported already) and of its inputs.
func (l *Loader) use(u *Use, args starlark.Tuple, kwargs []starlark.Tuple, cfgKey string, reported map[string]bool, tree func() *syntax.File, errs *Errors) {
	fail := func(format string, a ...any) { errs.add(fmt.Errorf(format, a...), u.Pos) }
	var inputs *starlark.Dict
	if err := starlark.UnpackArgs("use", args, kwargs, "ref", &u.Ref, "id?", &u.ID, "inputs?", &inputs); err != nil {
		fail("%v", err)
		return
	}
	if u.ID != "" {
		if err := lifecycle.CheckID("plug id", u.ID); err != nil {
			fail("use %q: %v", u.Ref, err)
		}
	}
	key, err := l.resolve(u.Ref, cfgKey)
	if err != nil {
		fail("use %q: %v", u.Ref, err)
		return
	}
	u.Key = key
	u.Plug, err = l.loadPlug(key)
	if err == nil {
		err = l.checkRemote(u.Ref, key)
	}
	if err != nil && !reported[key] {
		reported[key] = true
		var list Errors
		if !errors.As(err, &list) {
			list = Errors{{Msg: err.Error(), cause: err}}
		}
		for _, e := range list {
			*errs = append(*errs, &Error{Pos: u.Pos, Msg: fmt.Sprintf("use %q: %v", u.Ref, e), cause: e})
		}
	}
	if u.Plug == nil {
		return
	}
	if inputs == nil {
		inputs = new(starlark.Dict)
	}
	for _, k := range inputs.Keys() {
		if _, ok := k.(starlark.String); !ok {
			fail("use %q: inputs: keys must be strings, got %s", u.Ref, k.Type())
			return
		}
	}
	inputs.Freeze()
	u.Inputs = inputs
	if u.Plug.Persisted != nil && u.ID == "" {
		fail("plug %s declares persisted state, so it needs an id: use(%q, id = \"...\")", u.Plug.Name, u.Ref)
	}
	if u.Plug.Inputs == nil && inputs.Len() > 0 {
		fail("plug %s declares no inputs, but inputs are given", u.Plug.Name)
		return
	}
	if containsFunction(inputs) {
		return
	}
	u.Static = true
	_, err = ValidateInputs(u, inputs)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		if err != nil {
			fail("%v", err)
		}
		return
	}
	// Each problem is reported at the value it is about, when the call
	// writes the inputs out.
	call := callAt(tree(), u.Pos)
	for _, p := range ve.Problems {
		*errs = append(*errs, &Error{Pos: inputPos(call, p, u.Pos), Plug: u.Plug.Name, Msg: p.String()})
	}
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

// loadPlug loads the plug file with key. A plug whose declaration loaded
// comes back with the mistakes of its handlers, so that its inputs can
// still be checked.
func (l *Loader) loadPlug(key string) (*Plug, error) {
	var slot *Plug
	m, err := l.load(key, plugFile, l.withPlug(), bindPlugSlot(&slot))
	if m == nil {
		return nil, err
	}
	return m.plug, err
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
