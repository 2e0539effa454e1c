package chain

import (
	"path/filepath"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
)

type readOnlyAgent struct {
	handler string
	agent   *builtins.AgentDraft
}

// newCtx makes the ctx of one handler call.
func (r *Run) newCtx(p *plugRun, handler string, host hosts.Host) *builtins.Ctx {
	c := new(builtins.Ctx)
	r.initCtx(c, p, handler, r.hostValues.of(host))
	return c
}

// initCtx makes c the ctx of a call of the plug's handler, on the host
// whose value is host.
func (r *Run) initCtx(c *builtins.Ctx, p *plugRun, handler string, host starlark.Value) {
	if p.base == nil {
		p.base = &builtins.CtxBase{
			PlugName:  p.use.Plug.Name,
			PlugID:    p.use.ID,
			PlugIndex: p.use.Index,
			// Set before loading: input functions run before it.
			PersistedDeclared: p.use.Plug.Persisted != nil,
			Session:           r.sessionValue,
			Run:               r.runValue,
			Setup:             r.setup,
			RunnerEnv:         r.runnerEnv,
			Logger:            r.log.WithPrefix(p.use.Plug.Name),
			LogLine:           r.opts.PlugLog.of(p.use.Plug.Name),
			Signal:            &r.signal,
			Runner:            r.hostValues.of(r.runnerHost),
			SetOutput:         p.setOutput,
			ReportChanges:     func(c lifecycle.Changes) { r.changes = &c },
		}
	}
	p.base.Inputs, p.base.State, p.base.Persisted = p.inputs, p.state, p.persisted
	*c = builtins.Ctx{CtxBase: p.base, Handler: handler, Host: host, Agent: p.readOnlyAgent(&r.opts.Config.Agent, handler)}
}

// readOnlyAgent returns the plug's ctx.agent in handler, which cannot
// change it: ctx.agent is writable only in on_session before next(), where
// session() replaces this read-only copy with the plug's draft.
func (p *plugRun) readOnlyAgent(a *interp.Agent, handler string) *builtins.AgentDraft {
	// A few handlers, looked for at every on_message: a slice is quicker
	// than a map.
	for _, ro := range p.readOnly {
		if ro.handler == handler {
			return ro.agent
		}
	}
	agent := builtins.NewAgentDraft(a.Command, a.Args, a.Env, a.Cwd).For(p.use.Plug.Name).ReadOnlyIn(handler)
	p.readOnly = append(p.readOnly, readOnlyAgent{handler, agent})
	return agent
}

// setOutput publishes an output of the plug for later plugs (C10).
func (p *plugRun) setOutput(name string, v starlark.Value) error {
	if _, ok := p.outputs[name]; !ok {
		p.order = append(p.order, name)
	}
	p.outputs[name] = v
	if p.base.Logger.GetLevel() <= log.DebugLevel {
		p.base.Logger.Debug(LogSetOutput, "name", name, "value", v.String())
	}
	return nil
}

func (o *Options) agentName() string {
	return filepath.Base(o.Config.Agent.Command)
}

// hostValues are the values of the hosts as plugs see them (ctx.host), by
// host.
type hostValues map[hosts.Host]starlark.Value

// of returns the value of h, made on first use.
func (hv hostValues) of(h hosts.Host) starlark.Value {
	if v, ok := hv[h]; ok {
		return v
	}
	v := builtins.NewHost(h, "host")
	hv[h] = v
	return v
}

// chainPlugs are the plugs of the chain in the run, outermost first.
type chainPlugs []*plugRun

func (ps chainPlugs) ids() []string {
	var ids []string
	for _, p := range ps {
		if p.use.ID != "" {
			ids = append(ids, p.use.ID)
		}
	}
	return ids
}

// outputs returns the outputs plug id published in this run (C10).
func (ps chainPlugs) outputs(id string) *interp.Record {
	for _, p := range ps {
		if p.use.ID == id {
			vals := make([]starlark.Value, len(p.order))
			for i, k := range p.order {
				vals[i] = p.outputs[k]
			}
			return interp.NewRecord(p.order, vals).WithName("setup[" + id + "].outputs")
		}
	}
	return interp.NewRecord(nil, nil)
}

// unresumable names the plugs that cannot resume.
func (ps chainPlugs) unresumable() []string {
	var names []string
	for _, p := range ps {
		if !p.use.Plug.Resumable {
			names = append(names, p.use.Name())
		}
	}
	return names
}

// teardownOrder lists the plugs that take part in a teardown, outermost first.
func (ps chainPlugs) teardownOrder() []int {
	var order []int
	for i, p := range ps {
		if p.use.Plug.OnTeardown != nil {
			order = append(order, i)
		}
	}
	return order
}
