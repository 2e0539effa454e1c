package interp

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// A Kind is the kind of value a Schema describes.
type Kind uint8

const (
	KindString   Kind = iota // schema.string
	KindInt                  // schema.int
	KindFloat                // schema.float
	KindBool                 // schema.bool
	KindList                 // schema.list
	KindDict                 // schema.dict
	KindEnum                 // schema.enum
	KindOptional             // schema.optional
	KindAny                  // schema.any
	KindObject               // schema.object
)

var kindNames = [...]string{
	KindString:   "string",
	KindInt:      "int",
	KindFloat:    "float",
	KindBool:     "bool",
	KindList:     "list",
	KindDict:     "dict",
	KindEnum:     "enum",
	KindOptional: "optional",
	KindAny:      "any",
	KindObject:   "object",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// A Schema describes and validates a value, such as a plug's inputs.
// Schemas are made in Starlark by the functions of [SchemaModule].
// Their Starlark type is "schema". A Schema is immutable.
type Schema struct {
	Inert // immutable
	Unhashable[*Schema]

	kind Kind
	doc  string
	dflt starlark.Value // validated and frozen default; nil if none

	minLen, maxLen int            // string, list; -1 if unset
	pattern        *regexp.Regexp // string
	min, max       starlark.Value // int, float: Int or Float; nil if unset
	elem           *Schema        // list item, dict value, optional inner schema
	enum           []string       // enum
	names          []string       // object field names, in order
	fields         []*Schema      // object field schemas, parallel to names
}

var _ starlark.Value = (*Schema)(nil)

// Kind returns the kind of s.
func (s *Schema) Kind() Kind { return s.kind }

// Doc returns the documentation given by doc=, or for an optional
// schema without one, that of the schema it wraps.
func (s *Schema) Doc() string {
	if s.doc == "" && s.kind == KindOptional {
		return s.elem.Doc()
	}
	return s.doc
}

// Default returns the value that an absent value validates to, if any.
// An optional schema defaults to the default of the schema it wraps, or
// else None; an object defaults to the record of its fields' defaults
// when every field has one. The value is frozen.
func (s *Schema) Default() (starlark.Value, bool) { return s.dflt, s.dflt != nil }

// Elem returns the item schema of a list, the value schema of a dict,
// the schema wrapped by an optional schema, and nil for other kinds.
func (s *Schema) Elem() *Schema { return s.elem }

// Fields iterates over the fields of an object schema, in order.
func (s *Schema) Fields() iter.Seq2[string, *Schema] {
	return func(yield func(string, *Schema) bool) {
		for i, name := range s.names {
			if !yield(name, s.fields[i]) {
				return
			}
		}
	}
}

// Enum returns the values allowed by an enum schema.
func (s *Schema) Enum() []string { return slices.Clone(s.enum) }

func (s *Schema) String() string { return "<schema " + s.Describe() + ">" }
func (s *Schema) Type() string   { return "schema" }

// Describe returns a short description of the values s accepts, such as
// "string", "int ≥ 1", "list of string", `one of "a", "b"`,
// "string or None", "object{who: string, n?: int}". A field marked "?"
// may be absent.
func (s *Schema) Describe() string {
	var buf strings.Builder
	s.describe(&buf)
	return buf.String()
}

func (s *Schema) describe(buf *strings.Builder) {
	switch s.kind {
	case KindString:
		buf.WriteString("string")
		var cons []string
		if c := lenBounds(s.minLen, s.maxLen); c != "" {
			cons = append(cons, "length "+c)
		}
		if s.pattern != nil {
			cons = append(cons, "pattern "+strconv.Quote(s.pattern.String()))
		}
		if len(cons) > 0 {
			fmt.Fprintf(buf, " (%s)", strings.Join(cons, ", "))
		}
	case KindInt, KindFloat:
		buf.WriteString(s.kind.String())
		if s.min != nil {
			fmt.Fprintf(buf, " ≥ %s", s.min)
		}
		if s.min != nil && s.max != nil {
			buf.WriteString(" and")
		}
		if s.max != nil {
			fmt.Fprintf(buf, " ≤ %s", s.max)
		}
	case KindBool, KindAny:
		buf.WriteString(s.kind.String())
	case KindList, KindDict:
		buf.WriteString(s.kind.String())
		buf.WriteString(" of ")
		s.elem.describeNested(buf)
		if c := lenBounds(s.minLen, s.maxLen); c != "" {
			fmt.Fprintf(buf, " (length %s)", c)
		}
	case KindEnum:
		buf.WriteString("one of ")
		for i, x := range s.enum {
			if i > 0 {
				buf.WriteString(", ")
			}
			buf.WriteString(starlark.String(x).String())
		}
	case KindOptional:
		if k := s.elem.kind; k == KindList || k == KindDict {
			buf.WriteByte('(')
			s.elem.describe(buf)
			buf.WriteByte(')')
		} else {
			s.elem.describe(buf)
		}
		buf.WriteString(" or None")
	case KindObject:
		buf.WriteString("object{")
		for i, name := range s.names {
			if i > 0 {
				buf.WriteString(", ")
			}
			if isIdent(name) {
				buf.WriteString(name)
			} else {
				buf.WriteString(starlark.String(name).String())
			}
			f := s.fields[i]
			if f.dflt != nil {
				buf.WriteByte('?')
			}
			buf.WriteString(": ")
			if f.kind == KindOptional {
				f = f.elem // "n?: int", not "n?: int or None"
			}
			f.describe(buf)
		}
		buf.WriteByte('}')
	}
}

// describeNested describes s as the element of a list or dict,
// in parentheses if needed for clarity.
func (s *Schema) describeNested(buf *strings.Builder) {
	switch {
	case s.kind == KindList, s.kind == KindDict, s.kind == KindOptional, s.kind == KindEnum,
		s.kind == KindString && (s.pattern != nil || s.minLen >= 0 || s.maxLen >= 0):
		buf.WriteByte('(')
		s.describe(buf)
		buf.WriteByte(')')
	default:
		s.describe(buf)
	}
}

// lenBounds describes length bounds (-1 if unset): "≥ 1", "≤ 3",
// "≥ 1 and ≤ 3", or "" if there are none.
func lenBounds(min, max int) string {
	switch {
	case min >= 0 && max >= 0:
		return fmt.Sprintf("≥ %d and ≤ %d", min, max)
	case min >= 0:
		return fmt.Sprintf("≥ %d", min)
	case max >= 0:
		return fmt.Sprintf("≤ %d", max)
	}
	return ""
}

// A ValidationError reports every way a value fails to match a schema.
type ValidationError struct {
	Problems []Problem // at least one
}

// A Problem is one way a value fails to match a schema.
type Problem struct {
	Path string // where, e.g. "inputs.tags[2]"; may be "" for the root
	Msg  string // what, e.g. "want string, got int"
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Error lists the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Validate checks v against s and returns the validated value, or a
// *ValidationError listing all problems, each with its path under path
// (such as "inputs"). A nil v means absent: it validates to the default,
// if any.
//
// The result is frozen. Objects (given as dict, object, record or
// struct) become *Record with the fields in declaration order and
// defaults filled in; unless path is "", a record is named by its path in
// error messages (`inputs has no field "x"`). Lists (or tuples) become new
// *starlark.List; dicts (or objects, records) become new *starlark.Dict; a float
// schema turns ints into floats. The value of an any schema is copied in
// the same way.
func (s *Schema) Validate(v starlark.Value, path string) (starlark.Value, error) {
	vr := validator{naming: path != ""}
	res := vr.validate(s, v, path)
	if len(vr.problems) > 0 {
		return nil, &ValidationError{Problems: vr.problems}
	}
	return res, nil
}

// ValidateHidden is Validate for values that must not appear in messages
// or logs, such as persisted state (C11): problems name the types only.
func (s *Schema) ValidateHidden(v starlark.Value, path string) (starlark.Value, error) {
	vr := validator{naming: path != "", hidden: true}
	res := vr.validate(s, v, path)
	if len(vr.problems) > 0 {
		return nil, &ValidationError{Problems: vr.problems}
	}
	return res, nil
}

// ValidateJSON decodes data with [FromJSON] and validates it with Validate.
// A decoding error is prefixed with path.
func (s *Schema) ValidateJSON(data []byte, path string) (starlark.Value, error) {
	v, err := FromJSON(data)
	if err != nil {
		return nil, pathErrorf(path, "%v", err)
	}
	return s.Validate(v, path)
}
