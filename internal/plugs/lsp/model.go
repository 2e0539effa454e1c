package lsp

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/docs"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// A typ is what the server knows of the value of an expression.
type typ struct {
	name   string         // a key of model.values, "next:RESULT", or "" when unknown
	schema *interp.Schema // for a record of an object schema: ctx.inputs, ctx.persisted.value
	path   string         // that record's name in messages: inputs, inputs.git
}

// nextPrefix marks the type of next: calling it gives the type after the colon.
const nextPrefix = "next:"

// model is what the server knows of the names plug and configuration
// files use: attributes from the values themselves, docs from the
// user documentation.
type model struct {
	values  map[string]starlark.HasAttrs // by type name (blanks) or module name
	modules map[string]bool              // the predeclared names among values
	globals []string                     // predeclared in every file
	config  []string                     // predeclared in configurations only
	ref     reference
}

// Reference documents of the user documentation, in the order in which
// they document names first.
var referenceDocs = []string{"plugs.md", "messages.md", "config.md", "hosts.md"}

// newModel builds the model from the names every file sees
// (Loader.FilePredeclared).
func newModel(predeclared starlark.StringDict) (*model, error) {
	ref, err := readReference(docs.Reference, referenceDocs...)
	if err != nil {
		return nil, fmt.Errorf("reading the reference: %w", err)
	}
	m := &model{values: builtins.Blanks(), modules: map[string]bool{}, ref: ref, config: interp.ConfigNames}
	for k, v := range predeclared {
		m.globals = append(m.globals, k)
		if mod, ok := v.(starlark.HasAttrs); ok {
			m.values[k], m.modules[k] = mod, true
		}
	}
	sort.Strings(m.globals)
	return m, nil
}

// attrTypes are the types of attributes that hold values with attributes.
var attrTypes = map[string]string{
	"ctx.host":      "host",
	"ctx.runner":    "host",
	"ctx.log":       "log",
	"ctx.signal":    "signal",
	"ctx.persisted": "persisted",
	"ctx.agent":     "agent",
	"host.fs":       "fs",
}

// callTypes are the types of what methods return.
var callTypes = map[string]string{
	"host.spawn":    "process",
	"hosts.command": "host",
	"hosts.ssh":     "host",
}

// docPrefix is where the documentation describes the attributes of a
// type, when not under its own name.
var docPrefix = map[string]string{
	"fs":        "host.fs",
	"persisted": "ctx.persisted",
	"log":       "ctx.log",
	"signal":    "ctx.signal",
}

// attr returns the type of t.name. inputs and persisted are the plug's schemas.
func (m *model) attr(t typ, name string, inputs, persisted *interp.Schema) typ {
	switch {
	case t.schema != nil:
		if f := field(t.schema, name); f != nil {
			return typ{schema: f, path: t.path + "." + name}
		}
	case t.name == "ctx" && name == "inputs" && inputs != nil:
		return typ{schema: inputs, path: "inputs"}
	case t.name == "persisted" && name == "value" && persisted != nil:
		return typ{schema: persisted, path: "persisted"}
	}
	return typ{name: attrTypes[t.name+"."+name]}
}

// call returns the type of what calling t gives.
func (m *model) call(fn typ, method string) typ {
	if method == "" {
		return typ{name: strings.TrimPrefix(fn.name, nextPrefix)}
	}
	return typ{name: callTypes[fn.name+"."+method]}
}

// field returns the schema of field name of an object schema (or an
// optional one), or nil.
func field(s *interp.Schema, name string) *interp.Schema {
	if s.Kind() == interp.KindOptional {
		s = s.Elem()
	}
	if s.Kind() != interp.KindObject {
		return nil
	}
	for n, f := range s.Fields() {
		if n == name {
			return f
		}
	}
	return nil
}

// A member is an attribute as completion and hover show it.
type member struct {
	Name, Signature, Doc string
	Method               bool
}

// members lists the attributes of t, with their docs.
func (m *model) members(t typ) []member {
	var out []member
	if t.schema != nil {
		s := t.schema
		if s.Kind() == interp.KindOptional {
			s = s.Elem()
		}
		if s.Kind() == interp.KindObject {
			for n, f := range s.Fields() {
				out = append(out, member{Name: n, Signature: n + ": " + f.Describe(), Doc: f.Doc()})
			}
		}
		return out
	}
	v := m.values[t.name]
	if v == nil {
		return nil
	}
	for _, n := range v.AttrNames() {
		mem := member{Name: n, Signature: n}
		if e := m.doc(t, n); e != nil {
			mem.Signature, mem.Doc = e.Signature, e.Doc
			mem.Method = strings.Contains(e.Signature, "(")
		}
		out = append(out, mem)
	}
	return out
}

// doc returns the documentation of t.name, or nil.
func (m *model) doc(t typ, name string) *entry {
	prefix := t.name
	if p, ok := docPrefix[prefix]; ok {
		prefix = p
	}
	if e := m.ref[prefix+"."+name]; e != nil {
		return e
	}
	// A section may describe the attributes of a value at once (ctx.log,
	// time).
	if e := m.ref[prefix]; e != nil && (strings.Contains(e.Doc, "."+name+"`") || strings.Contains(e.Doc, "."+name+"(")) {
		return &entry{Signature: prefix + "." + name, Doc: e.Doc}
	}
	return nil
}

// unknownAttr returns the error a run would meet reading t.name, or ""
// when t has that attribute or is not known well enough to tell. The
// message is the interpreter's own: the attribute is read from a blank
// value of the type.
func (m *model) unknownAttr(t typ, name string) string {
	v := m.value(t)
	if v == nil || slices.Contains(v.AttrNames(), name) {
		return ""
	}
	thread := &starlark.Thread{Name: "attribute"}
	_, err := starlark.EvalOptions(interp.FileOptions, thread, "", "x."+name, starlark.StringDict{"x": v})
	var evalErr *starlark.EvalError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &evalErr):
		return evalErr.Msg
	}
	return err.Error()
}

// value returns a value of type t, or nil: a record with the fields of a
// schema, or a blank.
func (m *model) value(t typ) starlark.HasAttrs {
	if t.schema == nil {
		return m.values[t.name]
	}
	s := t.schema
	if s.Kind() == interp.KindOptional {
		s = s.Elem() // None, or a record that has the fields
	}
	if s.Kind() != interp.KindObject {
		return nil
	}
	var names []string
	var values []starlark.Value
	for n := range s.Fields() {
		names, values = append(names, n), append(values, starlark.None)
	}
	return interp.NewRecord(names, values).WithName(t.path)
}
