package builtins

import (
	"context"
	"fmt"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// MaxPersistedSize bounds the JSON encoding of one plug's persisted value (C11).
const MaxPersistedSize = 8 << 10

// MemStore is persisted plug state in memory, for tests and single-process use.
type MemStore struct {
	mu     sync.Mutex
	values map[[2]string][]byte
	names  map[[2]string]string
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{values: map[[2]string][]byte{}, names: map[[2]string]string{}}
}

func (m *MemStore) Get(_ context.Context, session, plugID string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[[2]string{session, plugID}]
	return v, ok, nil
}

func (m *MemStore) Set(_ context.Context, session, plugID, plugName string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[[2]string{session, plugID}] = append([]byte(nil), data...)
	m.names[[2]string{session, plugID}] = plugName
	return nil
}

func (m *MemStore) Delete(_ context.Context, session, plugID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, [2]string{session, plugID})
	delete(m.names, [2]string{session, plugID})
	return nil
}

// Persisted is ctx.persisted: the plug's value hosted by the control plane.
type Persisted struct {
	Store   lifecycle.Persisted
	Session string
	PlugID  string
	Plug    string
	Schema  *interp.Schema
	// Value is the validated current value, or None.
	Value starlark.Value
	// Parent is, in the first run of a fork, the value the session it was
	// forked from holds for the same plug id, validated; nil: None.
	Parent starlark.Value
	mu     sync.Mutex
}

// persistedView is ctx.persisted: the plug's Persisted, through one ctx.
type persistedView struct {
	interp.Opaque[*persistedView]

	*Persisted
	ctx *Ctx
}

var _ starlark.HasAttrs = (*persistedView)(nil)

func (p *persistedView) String() string      { return "persisted" }
func (p *persistedView) Type() string        { return "persisted" }
func (p *persistedView) AttrNames() []string { return []string{"clear", "parent", "set", "value"} }

func (p *persistedView) Attr(name string) (starlark.Value, error) {
	if err := p.ctx.check(); err != nil {
		return nil, err
	}
	switch name {
	case "value":
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.Value == nil {
			return starlark.None, nil
		}
		return p.Value, nil
	case "parent":
		if p.Parent == nil {
			return starlark.None, nil
		}
		return p.Parent, nil
	case "set":
		return starlark.NewBuiltin("persisted.set", p.set), nil
	case "clear":
		return starlark.NewBuiltin("persisted.clear", p.clear), nil
	}
	return nil, noSuchAttr("persisted", name, nil)
}

func (p *persistedView) set(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	if err := p.ctx.check(); err != nil {
		return nil, err
	}
	valid, data, err := EncodePersisted(p.Schema, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	Blocking(thread, func() { err = p.Store.Set(Context(thread), p.Session, p.PlugID, p.Plug, data) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	p.mu.Lock()
	p.Value = valid
	p.mu.Unlock()
	return starlark.None, nil
}

func (p *persistedView) clear(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	if err := p.ctx.check(); err != nil {
		return nil, err
	}
	var err error
	Blocking(thread, func() { err = p.Store.Delete(Context(thread), p.Session, p.PlugID) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	p.mu.Lock()
	p.Value = nil
	p.mu.Unlock()
	return starlark.None, nil
}

// EncodePersisted validates v against schema and encodes it as JSON within
// MaxPersistedSize. The error never shows the value: persisted state may
// hold identifiers that do not belong in logs (C11).
func EncodePersisted(schema *interp.Schema, v starlark.Value) (starlark.Value, []byte, error) {
	valid, err := schema.ValidateHidden(v, "persisted")
	if err != nil {
		return nil, nil, err
	}
	data, err := interp.ToJSON(valid)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxPersistedSize {
		return nil, nil, fmt.Errorf("value is %d bytes as JSON; persisted state is limited to %d bytes: keep identifiers there, not data", len(data), MaxPersistedSize)
	}
	return valid, data, nil
}
