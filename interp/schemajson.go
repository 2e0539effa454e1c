package interp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// schemaJSON is a schema as JSON: the arguments of the function of the
// schema module that makes it, so that ParseSchemaJSON makes it again with
// the same checks. An optional or object schema's default follows from
// its parts, as the functions make it.
type schemaJSON struct {
	Kind    string          `json:"kind"`
	Doc     string          `json:"doc,omitempty"`
	Default json.RawMessage `json:"default,omitempty"`
	MinLen  *int            `json:"min_len,omitempty"`
	MaxLen  *int            `json:"max_len,omitempty"`
	Pattern string          `json:"pattern,omitempty"`
	Min     json.RawMessage `json:"min,omitempty"`
	Max     json.RawMessage `json:"max,omitempty"`
	// Elem is the item of a list, the value of a dict, the schema an
	// optional one wraps.
	Elem   *Schema     `json:"elem,omitempty"`
	Enum   []string    `json:"enum,omitempty"`
	Fields []fieldJSON `json:"fields,omitempty"`
}

type fieldJSON struct {
	Name   string  `json:"name"`
	Schema *Schema `json:"schema"`
}

// MarshalJSON encodes s for ParseSchemaJSON: how a runner tells a server
// the schemas of its actions' arguments.
func (s *Schema) MarshalJSON() ([]byte, error) {
	j := schemaJSON{Kind: s.kind.String(), Doc: s.doc, Enum: s.enum, Elem: s.elem}
	var err error
	if s.dflt != nil && s.kind != KindOptional && s.kind != KindObject {
		if j.Default, err = ToJSON(s.dflt); err != nil {
			return nil, fmt.Errorf("the default: %w", err)
		}
	}
	if s.kind == KindString || s.kind == KindList {
		j.MinLen, j.MaxLen = bound(s.minLen), bound(s.maxLen)
	}
	if s.pattern != nil {
		j.Pattern = s.pattern.String()
	}
	for _, b := range []struct {
		v   starlark.Value
		out *json.RawMessage
	}{{s.min, &j.Min}, {s.max, &j.Max}} {
		if b.v != nil {
			if *b.out, err = ToJSON(b.v); err != nil {
				return nil, err
			}
		}
	}
	for i, name := range s.names {
		j.Fields = append(j.Fields, fieldJSON{Name: name, Schema: s.fields[i]})
	}
	return json.Marshal(j)
}

// bound is a length bound for JSON: nil if unset (-1).
func bound(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

// UnmarshalJSON makes the schema MarshalJSON encoded, checked as the
// schema module checks the schemas it makes.
func (s *Schema) UnmarshalJSON(data []byte) error {
	var j schemaJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	made, err := j.schema()
	if err != nil {
		return err
	}
	*s = *made
	return nil
}

// ParseSchemaJSON makes the schema data encodes (Schema.MarshalJSON).
func ParseSchemaJSON(data []byte) (*Schema, error) {
	s := new(Schema)
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("a schema as JSON: %w", err)
	}
	return s, nil
}

// schema calls the schema module's function of j's kind with j's
// arguments.
func (j *schemaJSON) schema() (*Schema, error) {
	fn, ok := SchemaModule.Members[j.Kind].(*starlark.Builtin)
	if !ok {
		return nil, fmt.Errorf("unknown schema kind %q", j.Kind)
	}
	var args starlark.Tuple
	var kwargs []starlark.Tuple
	kw := func(name string, v starlark.Value) {
		kwargs = append(kwargs, starlark.Tuple{starlark.String(name), v})
	}
	if j.Doc != "" {
		kw("doc", starlark.String(j.Doc))
	}
	for _, v := range []struct {
		name string
		raw  json.RawMessage
	}{{"default", j.Default}, {"min", j.Min}, {"max", j.Max}} {
		if v.raw == nil {
			continue
		}
		x, err := FromJSON(v.raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		kw(v.name, x)
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{"min_len", j.MinLen}, {"max_len", j.MaxLen}} {
		if v.n != nil {
			kw(v.name, starlark.MakeInt(*v.n))
		}
	}
	if j.Pattern != "" {
		kw("pattern", starlark.String(j.Pattern))
	}
	if j.Elem != nil {
		args = append(args, j.Elem)
	}
	for _, x := range j.Enum {
		args = append(args, starlark.String(x))
	}
	if j.Kind == "object" {
		fields := starlark.NewDict(len(j.Fields))
		for _, f := range j.Fields {
			if f.Schema == nil {
				return nil, fmt.Errorf("field %s has no schema", strconv.Quote(f.Name))
			}
			if err := fields.SetKey(starlark.String(f.Name), f.Schema); err != nil {
				return nil, err
			}
		}
		args = append(args, fields)
	}
	v, err := starlark.Call(&starlark.Thread{Name: "schema"}, fn, args, kwargs)
	if err != nil {
		return nil, err
	}
	return v.(*Schema), nil
}

// ValidateArgsJSON validates the arguments of an action, a JSON object
// (empty data: none) whose string values, as a command line gives them,
// are read by the kind of their field ("true" for a bool, "3" for an
// int); problems' paths are under "args". s is the action's object
// schema.
func (s *Schema) ValidateArgsJSON(data []byte) (starlark.Value, error) {
	fields := map[string]any{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil, fmt.Errorf("its arguments are not a JSON object: %w", err)
		}
	}
	for name, v := range fields {
		str, ok := v.(string)
		if !ok {
			continue
		}
		for fname, fs := range s.Fields() {
			if fname == name {
				fields[name] = fromCommandLine(fs, str)
			}
		}
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	return s.ValidateJSON(data, "args")
}

// fromCommandLine reads v, a value given on a command line, as the kind of
// s, its field's schema, wants it; what does not read stays the string,
// for the schema's error to name.
func fromCommandLine(s *Schema, v string) any {
	kind := s.Kind()
	if kind == KindOptional && s.Elem() != nil {
		kind = s.Elem().Kind()
	}
	switch kind {
	case KindBool:
		if b, err := strconv.ParseBool(strings.ToLower(v)); err == nil {
			return b
		}
	case KindInt:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case KindFloat:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}
