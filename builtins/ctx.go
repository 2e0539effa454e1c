package builtins

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
)

// CtxBase is what every ctx of one plug in one run shares.
type CtxBase struct {
	PlugName  string
	PlugID    string // empty when setup gives none
	PlugIndex int

	Inputs    starlark.Value
	State     starlark.Value
	Persisted *Persisted // nil when the plug declares no persisted schema, or before it is loaded
	// PersistedDeclared tells the two cases of a nil Persisted apart.
	PersistedDeclared bool
	Session           starlark.Value
	Run               starlark.Value
	Setup             *Setup
	RunnerEnv         starlark.Value
	Logger            *log.Logger // the plug's logger
	// LogLine, when set, also receives each line the plug logs at a level
	// Logger writes (the run keeps them in its plug log).
	LogLine func(level log.Level, msg string, keyvals []any)
	Signal  *Signal
	Runner  starlark.Value
	// SetOutput publishes an output of this plug for later plugs (C10).
	SetOutput func(name string, v starlark.Value) error
	// ReportChanges records the summary of the session's changes
	// (ctx.report_changes); nil: the run keeps none.
	ReportChanges func(lifecycle.Changes)
}

// Ctx is the ctx value of one handler call. It is bound to its plug and to
// that call: once the handler returns, every use of it fails (Close).
type Ctx struct {
	interp.Opaque[*Ctx]

	*CtxBase
	Handler string
	Host    starlark.Value
	Agent   *AgentDraft
	// Reached, when not nil, is set once the handler takes from ctx
	// anything but ctx.log and ctx.plug: what outlives the call (ctx.state,
	// the outputs under ctx.setup …) is reached through ctx alone, since a
	// plug's globals are frozen, so a handler that never set it kept no
	// value it saw.
	Reached *bool

	closed atomic.Bool
}

var _ starlark.HasAttrs = (*Ctx)(nil)

// Close ends the handler call; later uses of ctx fail.
func (c *Ctx) Close() { c.closed.Store(true) }

func (c *Ctx) check() error {
	if c.closed.Load() {
		return fmt.Errorf("ctx of plug %s (%s) used after its handler returned; a ctx belongs to one handler call", c.PlugName, c.Handler)
	}
	return nil
}

func (c *Ctx) String() string {
	return fmt.Sprintf("ctx(plug = %q, handler = %q)", c.PlugName, c.Handler)
}
func (c *Ctx) Type() string { return "ctx" }

var ctxAttrs = []string{"agent", "host", "inputs", "log", "persisted", "plug", "report_changes", "run", "runner", "runner_env", "session", "set_output", "setup", "signal", "state"}

func (c *Ctx) AttrNames() []string { return ctxAttrs }

func (c *Ctx) Attr(name string) (starlark.Value, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.Reached != nil && name != "log" && name != "plug" {
		*c.Reached = true
	}
	switch name {
	case "inputs":
		return orNone(c.Inputs), nil
	case "state":
		return orNone(c.State), nil
	case "persisted":
		if c.Persisted == nil && c.PersistedDeclared {
			return nil, fmt.Errorf("ctx.persisted is not loaded yet in %s of plug %s: read it in on_load or a handler", c.Handler, c.PlugName)
		}
		if c.Persisted == nil {
			return nil, fmt.Errorf("ctx.persisted: plug %s declares no persisted schema: add persisted = schema.object(...) to plug()", c.PlugName)
		}
		return &persistedView{Persisted: c.Persisted, ctx: c}, nil
	case "session":
		return c.Session, nil
	case "run":
		return c.Run, nil
	case "plug":
		var id starlark.Value = starlark.None
		if c.PlugID != "" {
			id = starlark.String(c.PlugID)
		}
		return interp.NewRecord([]string{"id", "index", "name"}, []starlark.Value{id, starlark.MakeInt(c.PlugIndex), starlark.String(c.PlugName)}).WithName("ctx.plug"), nil
	case "setup":
		return c.Setup, nil
	case "agent":
		return c.Agent, nil
	case "runner_env":
		return c.RunnerEnv, nil
	case "log":
		return &Log{Logger: c.Logger, ctx: c}, nil
	case "signal":
		return c.Signal, nil
	case "host":
		return c.Host, nil
	case "runner":
		return c.Runner, nil
	case "set_output":
		return starlark.NewBuiltin("set_output", c.setOutput), nil
	case "report_changes":
		return starlark.NewBuiltin("report_changes", c.reportChanges), nil
	}
	return nil, noSuchAttr("ctx", name, ctxAttrs)
}

func orNone(v starlark.Value) starlark.Value {
	if v == nil {
		return starlark.None
	}
	return v
}

func (c *Ctx) setOutput(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &name, &v); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.PlugID == "" {
		return nil, fmt.Errorf("set_output: plug %s has no id in setup, so no plug could read its outputs: use(..., id = \"...\")", c.PlugName)
	}
	v.Freeze()
	if err := c.SetOutput(name, v); err != nil {
		return nil, fmt.Errorf("set_output: %w", err)
	}
	return starlark.None, nil
}

// Setup is ctx.setup: the outputs of plugs by id (C10).
type Setup struct {
	interp.Opaque[*Setup]

	IDs     []string // ids of the chain, in setup order
	Outputs func(id string) *interp.Record
}

var _ starlark.Mapping = (*Setup)(nil)

func (s *Setup) String() string { return "setup" }
func (s *Setup) Type() string   { return "setup" }

func (s *Setup) Get(k starlark.Value) (starlark.Value, bool, error) {
	id, ok := starlark.AsString(k)
	if !ok {
		return nil, false, fmt.Errorf("setup: want a plug id (string), got %s", k.Type())
	}
	for _, known := range s.IDs {
		if known == id {
			entry := interp.NewRecord([]string{"id", "outputs"}, []starlark.Value{starlark.String(id), s.Outputs(id)})
			return entry.WithName("setup[" + id + "]"), true, nil
		}
	}
	if near := interp.Nearest(id, s.IDs); near != "" {
		return nil, false, fmt.Errorf("setup: no plug with id %q (did you mean %q?)", id, near)
	}
	ids := append([]string(nil), s.IDs...)
	sort.Strings(ids)
	return nil, false, fmt.Errorf("setup: no plug with id %q (ids: %v)", id, ids)
}

// Signal is ctx.signal: aborted when the session shuts down.
type Signal struct {
	interp.Opaque[*Signal]

	mu      sync.Mutex
	aborted bool
	reason  string
}

// Abort marks the signal aborted; the first reason wins.
func (s *Signal) Abort(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.aborted {
		s.aborted, s.reason = true, reason
	}
}

func (s *Signal) String() string      { return "signal" }
func (s *Signal) Type() string        { return "signal" }
func (s *Signal) AttrNames() []string { return []string{"aborted", "reason"} }

func (s *Signal) Attr(name string) (starlark.Value, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch name {
	case "aborted":
		return starlark.Bool(s.aborted), nil
	case "reason":
		if !s.aborted {
			return starlark.None, nil
		}
		return starlark.String(s.reason), nil
	}
	return nil, noSuchAttr("signal", name, s.AttrNames())
}
