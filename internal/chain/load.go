package chain

import (
	"context"
	"errors"
	"fmt"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// load evaluates and validates the plug's inputs (C14), migrates its
// persisted value (C9) and runs on_load, once per run.
func (r *Run) load(p *plugRun, host hosts.Host) error {
	if p.loaded {
		return p.loadErr
	}
	p.loaded = true
	p.loadErr = r.loadPlug(p, host)
	return p.loadErr
}

func (r *Run) loadPlug(p *plugRun, host hosts.Host) error {
	u := p.use
	inputs := u.Inputs
	if !u.Static {
		v, err := r.evalInputs(p, inputs, host)
		if err != nil {
			return err
		}
		inputs = v.(*starlark.Dict)
	}
	valid, err := interp.ValidateInputs(u, inputs)
	if err != nil {
		return &interp.Error{Pos: u.Pos, Msg: err.Error()}
	}
	p.inputs = valid

	if schema := u.Plug.Persisted; schema != nil {
		p.persisted = &builtins.Persisted{Store: r.opts.Store, Session: r.opts.SessionID, PlugID: u.ID, Plug: u.Plug.Name, Schema: schema}
		if err := r.loadPersisted(p, host); err != nil {
			return err
		}
		if r.opts.ForkedFrom != "" && r.opts.Kind == lifecycle.StartRun {
			var err error
			r.unlocked(func() { p.persisted.Parent, err = parentValue(r.ctx, r.opts.Store, r.opts.ForkedFrom, u) })
			if errors.Is(err, errParentInvalid) {
				r.log.Warn(err.Error(), "plug", u.Name(), "forked_from", r.opts.ForkedFrom)
			} else if err != nil {
				return err
			}
		}
	}
	if fn := u.Plug.OnLoad; fn != nil {
		c := r.newCtx(p, "on_load", host)
		v, err := r.call(p, "on_load", fn, c, starlark.Tuple{c})
		if err != nil {
			return err
		}
		p.state = v
	} else {
		p.state = starlark.NewDict(0)
	}
	return nil
}

// loadPersisted reads the stored value and migrates it when it no longer
// validates (C9).
func (r *Run) loadPersisted(p *plugRun, host hosts.Host) error {
	u := p.use
	var data []byte
	var ok bool
	var err error
	r.unlocked(func() { data, ok, err = r.opts.Store.Get(r.ctx, r.opts.SessionID, u.ID) })
	if err != nil {
		return fmt.Errorf("plug %s: reading persisted state: %w", u.Name(), err)
	}
	if !ok {
		return nil
	}
	stored, err := interp.FromJSON(data)
	if err != nil {
		return fmt.Errorf("plug %s: stored persisted state is not JSON: %w", u.Name(), err)
	}
	v, verr := u.Plug.Persisted.ValidateHidden(stored, "persisted")
	if verr == nil {
		p.persisted.Value = v
		return nil
	}
	fn := u.Plug.OnMigrate
	if fn == nil {
		return &interp.Error{Pos: u.Plug.Pos, Plug: u.Plug.Name, Msg: fmt.Sprintf("the stored persisted value no longer validates, and the plug has no on_migrate(ctx, stored):\n%v", verr)}
	}
	c := r.newCtx(p, "on_migrate", host)
	migrated, err := r.call(p, "on_migrate", fn, c, starlark.Tuple{c, stored})
	if err != nil {
		return err
	}
	if migrated == starlark.None {
		r.unlocked(func() { err = r.opts.Store.Delete(r.ctx, r.opts.SessionID, u.ID) })
		return err
	}
	valid, enc, err := builtins.EncodePersisted(u.Plug.Persisted, migrated)
	if err != nil {
		return r.handlerError(p, "on_migrate", fn, "the migrated value does not validate: "+err.Error())
	}
	r.unlocked(func() { err = r.opts.Store.Set(r.ctx, r.opts.SessionID, u.ID, u.Plug.Name, enc) })
	if err != nil {
		return fmt.Errorf("plug %s: writing migrated persisted state: %w", u.Name(), err)
	}
	p.persisted.Value = valid
	return nil
}

// parentValue reads the persisted value that forkedFrom, the session a
// fork was forked from, holds for u's id, validated: ctx.persisted.parent,
// read only, for the plug to copy what it decides to. nil: it holds none.
// One that no longer validates (the plug's schema changed since) is
// errParentInvalid.
func parentValue(ctx context.Context, store lifecycle.Persisted, forkedFrom string, u *interp.Use) (starlark.Value, error) {
	data, ok, err := store.Get(ctx, forkedFrom, u.ID)
	if err != nil {
		return nil, fmt.Errorf("plug %s: reading the persisted state of session %s, which this one is a fork of: %w", u.Name(), forkedFrom, err)
	}
	if !ok {
		return nil, nil
	}
	stored, err := interp.FromJSON(data)
	if err != nil {
		return nil, errParentInvalid
	}
	v, err := u.Plug.Persisted.ValidateHidden(stored, "persisted")
	if err != nil {
		return nil, errParentInvalid
	}
	return v, nil
}

var errParentInvalid = errors.New("the persisted value of the session this one is a fork of does not validate; ctx.persisted.parent is None")

// evalInputs calls every function in v with a ctx of the plug: the view of
// the run that inputs are functions of (C14).
func (r *Run) evalInputs(p *plugRun, v starlark.Value, host hosts.Host) (starlark.Value, error) {
	each := func(elems []starlark.Value) ([]starlark.Value, error) {
		out := make([]starlark.Value, len(elems))
		for i, e := range elems {
			x, err := r.evalInputs(p, e, host)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	switch v := v.(type) {
	case starlark.Callable:
		c := r.newCtx(p, "inputs", host)
		return r.call(p, "inputs", v, c, starlark.Tuple{c})
	case *starlark.Dict:
		out := starlark.NewDict(v.Len())
		for _, item := range v.Items() {
			x, err := r.evalInputs(p, item[1], host)
			if err != nil {
				return nil, err
			}
			_ = out.SetKey(item[0], x)
		}
		return out, nil
	case *starlark.List:
		elems := make([]starlark.Value, v.Len())
		for i := range elems {
			elems[i] = v.Index(i)
		}
		out, err := each(elems)
		return starlark.NewList(out), err
	case starlark.Tuple:
		out, err := each(v)
		return starlark.Tuple(out), err
	}
	return v, nil
}
