package interp

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// SchemaModule is the Starlark module "schema", whose functions make
// schemas:
//
//	schema.string(default=?, doc=?, min_len=?, max_len=?, pattern=?)
//	schema.int(default=?, doc=?, min=?, max=?)
//	schema.float(default=?, doc=?, min=?, max=?)
//	schema.bool(default=?, doc=?)
//	schema.list(item_schema, default=?, doc=?, min_len=?, max_len=?)
//	schema.dict(value_schema, default=?, doc=?)
//	schema.enum(value, ..., default=?, doc=?)
//	schema.optional(schema, doc=?)
//	schema.any(default=?, doc=?)
//	schema.object(fields_dict?, doc=?, **fields)
//
// Options are keyword arguments; an option given as None is absent,
// except default=None. A default must match its schema. Lengths count
// Unicode characters for strings and elements for lists. A pattern is an
// RE2 regular expression that must match somewhere in the string (use ^
// and $ to match all of it). Enum values are strings. An any schema
// accepts JSON-like data: None, bool, int, float, string, list, tuple,
// dict with string keys, record. An object's fields are schemas given as
// keyword arguments, or in a dict, for names such as "doc" that are not
// valid keyword arguments.
var SchemaModule = &starlarkstruct.Module{
	Name: "schema",
	Members: starlark.StringDict{
		"string":   starlark.NewBuiltin("schema.string", schemaString),
		"int":      starlark.NewBuiltin("schema.int", schemaNumber),
		"float":    starlark.NewBuiltin("schema.float", schemaNumber),
		"bool":     starlark.NewBuiltin("schema.bool", schemaPlain(KindBool)),
		"list":     starlark.NewBuiltin("schema.list", schemaList),
		"dict":     starlark.NewBuiltin("schema.dict", schemaDict),
		"enum":     starlark.NewBuiltin("schema.enum", schemaEnum),
		"optional": starlark.NewBuiltin("schema.optional", schemaOptional),
		"any":      starlark.NewBuiltin("schema.any", schemaPlain(KindAny)),
		"object":   starlark.NewBuiltin("schema.object", schemaObject),
	},
}

// setDefault validates and sets the default of s, if dflt is not nil.
func (s *Schema) setDefault(fn string, dflt starlark.Value) (*Schema, error) {
	if dflt == nil {
		return s, nil
	}
	if _, err := s.Validate(dflt, "default"); err != nil {
		var msgs []string
		for _, p := range err.(*ValidationError).Problems {
			msgs = append(msgs, p.String())
		}
		return nil, fmt.Errorf("%s: %s", fn, strings.Join(msgs, "; "))
	}
	s.dflt, _ = s.Validate(dflt, "") // again, so that no record is named "default"
	return s, nil
}

// noPositional reports an error if a builtin that takes only keyword
// arguments got positional ones.
func noPositional(b *starlark.Builtin, args starlark.Tuple) error {
	if len(args) > 0 {
		return fmt.Errorf("%s: got %d positional arguments, want keyword arguments only", b.Name(), len(args))
	}
	return nil
}

// lenArg converts an optional length argument (nil if absent) to an int,
// -1 if absent.
func lenArg(fn, name string, v starlark.Value) (int, error) {
	if v == nil {
		return -1, nil
	}
	var n int
	if err := starlark.AsInt(v, &n); err != nil {
		return 0, fmt.Errorf("%s: for parameter %q: got %s, want int", fn, name, typeName(v))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: %s must be ≥ 0, got %d", fn, name, n)
	}
	return n, nil
}

// checkLens checks that length bounds are consistent.
func checkLens(fn string, min, max int) error {
	if min >= 0 && max >= 0 && min > max {
		return fmt.Errorf("%s: min_len %d > max_len %d", fn, min, max)
	}
	return nil
}

func schemaString(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dflt, minLen, maxLen starlark.Value
	var doc, pattern string
	if err := noPositional(b, args); err != nil {
		return nil, err
	}
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs,
		"default?", &dflt, "doc??", &doc, "min_len??", &minLen, "max_len??", &maxLen, "pattern??", &pattern); err != nil {
		return nil, err
	}
	s := &Schema{kind: KindString, doc: doc}
	var err error
	if s.minLen, err = lenArg(b.Name(), "min_len", minLen); err != nil {
		return nil, err
	}
	if s.maxLen, err = lenArg(b.Name(), "max_len", maxLen); err != nil {
		return nil, err
	}
	if err := checkLens(b.Name(), s.minLen, s.maxLen); err != nil {
		return nil, err
	}
	if pattern != "" {
		if s.pattern, err = regexp.Compile(pattern); err != nil {
			return nil, fmt.Errorf("%s: invalid pattern: %v", b.Name(), err)
		}
	}
	return s.setDefault(b.Name(), dflt)
}

// schemaNumber implements schema.int and schema.float.
func schemaNumber(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dflt, min, max starlark.Value
	var doc string
	if err := noPositional(b, args); err != nil {
		return nil, err
	}
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs,
		"default?", &dflt, "doc??", &doc, "min??", &min, "max??", &max); err != nil {
		return nil, err
	}
	s := &Schema{kind: KindInt, doc: doc, min: min, max: max}
	if b.Name() == "schema.float" {
		s.kind = KindFloat
	}
	for _, bound := range []struct {
		name string
		v    starlark.Value
	}{{"min", min}, {"max", max}} {
		ok := bound.v == nil
		switch v := bound.v.(type) {
		case starlark.Int:
			ok = true
		case starlark.Float:
			ok = s.kind == KindFloat && isFinite(v)
		}
		if !ok {
			return nil, fmt.Errorf("%s: for parameter %q: got %s, want %s", b.Name(), bound.name, shortRepr(bound.v), s.kind)
		}
	}
	if min != nil && max != nil {
		if gt, _ := starlark.Compare(syntax.GT, min, max); gt {
			return nil, fmt.Errorf("%s: min %s > max %s", b.Name(), min, max)
		}
	}
	return s.setDefault(b.Name(), dflt)
}

// schemaPlain returns the constructor of a schema of kind that takes only a
// default and a doc: bool and any.
func schemaPlain(kind Kind) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var dflt starlark.Value
		var doc string
		if err := noPositional(b, args); err != nil {
			return nil, err
		}
		if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "default?", &dflt, "doc??", &doc); err != nil {
			return nil, err
		}
		return (&Schema{kind: kind, doc: doc}).setDefault(b.Name(), dflt)
	}
}

func schemaList(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var item *Schema
	var dflt, minLen, maxLen starlark.Value
	var doc string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs,
		"item_schema", &item, "default?", &dflt, "doc??", &doc, "min_len??", &minLen, "max_len??", &maxLen); err != nil {
		return nil, err
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("%s: got %d positional arguments, want 1", b.Name(), len(args))
	}
	s := &Schema{kind: KindList, doc: doc, elem: item}
	var err error
	if s.minLen, err = lenArg(b.Name(), "min_len", minLen); err != nil {
		return nil, err
	}
	if s.maxLen, err = lenArg(b.Name(), "max_len", maxLen); err != nil {
		return nil, err
	}
	if err := checkLens(b.Name(), s.minLen, s.maxLen); err != nil {
		return nil, err
	}
	return s.setDefault(b.Name(), dflt)
}

func schemaDict(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var value *Schema
	var dflt starlark.Value
	var doc string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value_schema", &value, "default?", &dflt, "doc??", &doc); err != nil {
		return nil, err
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("%s: got %d positional arguments, want 1", b.Name(), len(args))
	}
	return (&Schema{kind: KindDict, doc: doc, elem: value, minLen: -1, maxLen: -1}).setDefault(b.Name(), dflt)
}

func schemaEnum(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dflt starlark.Value
	var doc string
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "default?", &dflt, "doc??", &doc); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: want at least one value", b.Name())
	}
	s := &Schema{kind: KindEnum, doc: doc}
	for i, v := range args {
		x, ok := v.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: value %d: got %s, want string", b.Name(), i+1, typeName(v))
		}
		if slices.Contains(s.enum, string(x)) {
			return nil, fmt.Errorf("%s: duplicate value %s", b.Name(), x)
		}
		s.enum = append(s.enum, string(x))
	}
	return s.setDefault(b.Name(), dflt)
}

func schemaOptional(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var elem *Schema
	var doc string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "schema", &elem, "doc??", &doc); err != nil {
		return nil, err
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("%s: got %d positional arguments, want 1", b.Name(), len(args))
	}
	if elem.kind == KindOptional { // optional(optional(x)) = optional(x)
		if doc == "" {
			return elem, nil
		}
		elem = elem.elem
	}
	s := &Schema{kind: KindOptional, doc: doc, elem: elem, dflt: elem.dflt}
	if s.dflt == nil {
		s.dflt = starlark.None
	}
	return s, nil
}

func schemaObject(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	s := &Schema{kind: KindObject}
	add := func(name string, v starlark.Value) error {
		f, ok := v.(*Schema)
		if !ok {
			return fmt.Errorf("%s: field %s: got %s, want schema", b.Name(), name, typeName(v))
		}
		if slices.Contains(s.names, name) {
			return fmt.Errorf("%s: duplicate field %s", b.Name(), name)
		}
		s.names = append(s.names, name)
		s.fields = append(s.fields, f)
		return nil
	}
	switch len(args) {
	case 0:
	case 1:
		d, ok := args[0].(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("%s: got %s, want dict of fields", b.Name(), typeName(args[0]))
		}
		for k, v := range d.Entries() {
			name, ok := k.(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: got %s field name, want string", b.Name(), typeName(k))
			}
			if err := add(string(name), v); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("%s: got %d positional arguments, want at most 1", b.Name(), len(args))
	}
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		if name == "doc" {
			doc, ok := kv[1].(starlark.String)
			if !ok && kv[1] != starlark.None {
				return nil, fmt.Errorf("%s: for parameter \"doc\": got %s, want string", b.Name(), typeName(kv[1]))
			}
			s.doc = string(doc)
			continue
		}
		if err := add(name, kv[1]); err != nil {
			return nil, err
		}
	}
	// The object has a default if all its fields do.
	dflts := make([]starlark.Value, len(s.fields))
	for i, f := range s.fields {
		if dflts[i] = f.dflt; dflts[i] == nil {
			return s, nil
		}
	}
	s.dflt = NewRecord(s.names, dflts)
	return s, nil
}
