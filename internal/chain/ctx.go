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
	r.initCtx(c, p, handler, r.hostValue(host))
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
			Signal:            &r.signal,
			Runner:            r.hostValue(r.runnerHost),
			SetOutput:         p.setOutput,
			ReportChanges:     func(c lifecycle.Changes) { r.changes = &c },
		}
	}
	p.base.Inputs, p.base.State, p.base.Persisted = p.inputs, p.state, p.persisted
	*c = builtins.Ctx{CtxBase: p.base, Handler: handler, Host: host, Agent: r.readOnlyAgent(p, handler)}
}

// readOnlyAgent returns the plug's ctx.agent in handler, which cannot
// change it: ctx.agent is writable only in on_session before next(), where
// session() replaces this read-only copy with the plug's draft.
func (r *Run) readOnlyAgent(p *plugRun, handler string) *builtins.AgentDraft {
	// A few handlers, looked for at every on_message: a slice is quicker
	// than a map.
	for _, ro := range p.readOnly {
		if ro.handler == handler {
			return ro.agent
		}
	}
	a := r.opts.Config.Agent
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

func (r *Run) agentName() string {
	return filepath.Base(r.opts.Config.Agent.Command)
}

func (r *Run) hostValue(h hosts.Host) starlark.Value {
	if v, ok := r.hostValues[h]; ok {
		return v
	}
	v := builtins.NewHost(h, "host")
	r.hostValues[h] = v
	return v
}

func (r *Run) ids() []string {
	var ids []string
	for _, p := range r.plugs {
		if p.use.ID != "" {
			ids = append(ids, p.use.ID)
		}
	}
	return ids
}

// outputs returns the outputs plug id published in this run (C10).
func (r *Run) outputs(id string) *interp.Record {
	for _, p := range r.plugs {
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
