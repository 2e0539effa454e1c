package interp

import (
	"fmt"
	"iter"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
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

// A validator collects the problems found while validating a value.
type validator struct {
	problems []Problem
	naming   bool                    // whether to name records by their paths
	hidden   bool                    // whether messages leave values out
	active   map[starlark.Value]bool // containers being copied by any, to catch cycles
}

func (vr *validator) addf(path, format string, args ...any) {
	vr.problems = append(vr.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// repr shows v in a message: its type alone when values are hidden.
func (vr *validator) repr(v starlark.Value) string {
	if vr.hidden {
		return "a " + v.Type()
	}
	return shortRepr(v)
}

// accepts reports whether v has a type that s can accept.
func (s *Schema) accepts(v starlark.Value) bool {
	switch s.kind {
	case KindOptional:
		return v == starlark.None || s.elem.accepts(v)
	case KindAny:
		return true
	}
	var ok bool
	switch v.(type) {
	case starlark.String:
		ok = s.kind == KindString || s.kind == KindEnum
	case starlark.Int:
		ok = s.kind == KindInt || s.kind == KindFloat
	case starlark.Float:
		ok = s.kind == KindFloat
	case starlark.Bool:
		ok = s.kind == KindBool
	case *starlark.List, starlark.Tuple:
		ok = s.kind == KindList
	case *starlark.Dict, *Object, *Record, *starlarkstruct.Struct:
		ok = s.kind == KindDict || s.kind == KindObject
	}
	return ok
}

// validate returns the validated, frozen v, or nil after adding problems.
func (vr *validator) validate(s *Schema, v starlark.Value, path string) starlark.Value {
	if v == nil {
		if s.dflt == nil {
			vr.addf(path, "required field missing (want %s)", s.Describe())
			return nil
		}
		if r, ok := s.dflt.(*Record); ok && vr.naming {
			return r.WithName(path)
		}
		return s.dflt
	}
	if !s.accepts(v) {
		vr.addf(path, "want %s, got %s", s.Describe(), typeName(v))
		return nil
	}
	if s.kind == KindOptional {
		if v == starlark.None {
			return v
		}
		return vr.validate(s.elem, v, path)
	}
	switch s.kind {
	case KindString:
		x := v.(starlark.String)
		if n := utf8.RuneCountInString(string(x)); s.minLen >= 0 && n < s.minLen || s.maxLen >= 0 && n > s.maxLen {
			vr.addf(path, "want %s, got %s (length %d)", s.Describe(), vr.repr(x), n)
			return nil
		}
		if s.pattern != nil && !s.pattern.MatchString(string(x)) {
			vr.addf(path, "want %s, got %s", s.Describe(), vr.repr(x))
			return nil
		}
		return x

	case KindInt:
		if !s.inRange(v) {
			vr.addf(path, "want %s, got %s", s.Describe(), vr.repr(v))
			return nil
		}
		return v

	case KindFloat:
		x, _ := starlark.AsFloat(v)
		if f := starlark.Float(x); !isFinite(f) || !s.inRange(f) {
			vr.addf(path, "want %s, got %s", s.Describe(), vr.repr(v))
			return nil
		}
		return starlark.Float(x)

	case KindBool:
		return v

	case KindList:
		var elems []starlark.Value
		if list, ok := v.(*starlark.List); ok {
			elems = slices.Collect(list.Elements())
		} else {
			elems = slices.Clone(v.(starlark.Tuple))
		}
		n := len(vr.problems)
		if s.minLen >= 0 && len(elems) < s.minLen || s.maxLen >= 0 && len(elems) > s.maxLen {
			vr.addf(path, "want %s, got length %d", s.Describe(), len(elems))
		}
		for i, x := range elems {
			elems[i] = vr.validate(s.elem, x, indexPath(path, i))
		}
		if len(vr.problems) > n {
			return nil
		}
		list := starlark.NewList(elems)
		list.Freeze()
		return list

	case KindDict:
		n := len(vr.problems)
		keys, values := vr.members(s, v, path)
		dict := starlark.NewDict(len(keys))
		for i, k := range keys {
			if x := vr.validate(s.elem, values[i], fieldPath(path, k)); x != nil {
				dict.SetKey(starlark.String(k), x) // can't fail: unfrozen, string key
			}
		}
		if len(vr.problems) > n {
			return nil
		}
		dict.Freeze()
		return dict

	case KindEnum:
		if !slices.Contains(s.enum, string(v.(starlark.String))) {
			vr.addf(path, "want %s, got %s", s.Describe(), vr.repr(v))
			return nil
		}
		return v

	case KindAny:
		return vr.copyData(v, path)

	case KindObject:
		n := len(vr.problems)
		keys, values := vr.members(s, v, path)
		fields := make([]starlark.Value, len(s.names))
		for i, name := range s.names {
			var x starlark.Value // nil: absent
			if j := slices.Index(keys, name); j >= 0 {
				x = values[j]
			}
			fields[i] = vr.validate(s.fields[i], x, fieldPath(path, name))
		}
		var absent []string // fields not given, for hints
		for _, k := range keys {
			if !slices.Contains(s.names, k) {
				if absent == nil {
					absent = slices.DeleteFunc(slices.Clone(s.names), func(name string) bool {
						return slices.Contains(keys, name)
					})
				}
				if hint := Nearest(k, absent); hint != "" {
					vr.addf(fieldPath(path, k), "unknown field (did you mean %q?)", hint)
				} else {
					vr.addf(fieldPath(path, k), "unknown field")
				}
			}
		}
		if len(vr.problems) > n {
			return nil
		}
		r := NewRecord(s.names, fields)
		if vr.naming {
			r.name = path
		}
		return r
	}
	panic(fmt.Sprintf("invalid schema kind %v", s.kind))
}

// members returns the string keys and the values of a dict, record or
// struct v, which is given for schema s. It adds a problem for each key
// that is not a string.
func (vr *validator) members(s *Schema, v starlark.Value, path string) (keys []string, values []starlark.Value) {
	if o, ok := v.(*Object); ok {
		v = o.dict
	}
	switch v := v.(type) {
	case *starlark.Dict:
		for k, x := range v.Entries() {
			ks, ok := k.(starlark.String)
			if !ok {
				vr.addf(path, "want %s, got dict with %s key", s.Describe(), typeName(k))
				continue
			}
			keys = append(keys, string(ks))
			values = append(values, x)
		}
		return keys, values
	case *Record:
		return v.keys, v.values
	case *starlarkstruct.Struct:
		for _, k := range v.AttrNames() {
			x, err := v.Attr(k)
			if err != nil {
				vr.addf(fieldPath(path, k), "%v", err)
				continue
			}
			keys = append(keys, k)
			values = append(values, x)
		}
		return keys, values
	}
	panic(fmt.Sprintf("members of %s", v.Type()))
}

// copyData returns a frozen copy of JSON-like data v for an any schema:
// None, bool, int, finite float, string, list or tuple (copied as a
// list), dict or object with string keys (copied as a dict), record, or
// struct (copied as a record).
func (vr *validator) copyData(v starlark.Value, path string) starlark.Value {
	n := len(vr.problems)
	if o, ok := v.(*Object); ok {
		v = o.dict
	}
	switch v := v.(type) {
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.String:
		return v
	case starlark.Float:
		if !isFinite(v) {
			vr.addf(path, "want JSON data, got %s", v)
			return nil
		}
		return v
	case starlark.Tuple:
		return vr.copyList(v, path)
	case *starlark.List:
		if !vr.enter(v, path) {
			return nil
		}
		defer delete(vr.active, v)
		return vr.copyList(v, path)
	case *starlark.Dict:
		if !vr.enter(v, path) {
			return nil
		}
		defer delete(vr.active, v)
		dict := starlark.NewDict(v.Len())
		for k, x := range v.Entries() {
			ks, ok := k.(starlark.String)
			if !ok {
				vr.addf(path, "want JSON data, got dict with %s key", typeName(k))
				continue
			}
			if x := vr.copyData(x, fieldPath(path, string(ks))); x != nil {
				dict.SetKey(ks, x) // can't fail: unfrozen, string key
			}
		}
		if len(vr.problems) > n {
			return nil
		}
		dict.Freeze()
		return dict
	case *Record, *starlarkstruct.Struct:
		keys, values := vr.members(nil, v, path)
		copies := make([]starlark.Value, len(values))
		for i, x := range values {
			copies[i] = vr.copyData(x, fieldPath(path, keys[i]))
		}
		if len(vr.problems) > n {
			return nil
		}
		r := NewRecord(slices.Clone(keys), copies)
		if v, ok := v.(*Record); ok {
			r.name = v.name
		}
		return r
	}
	vr.addf(path, "want JSON data, got %s", typeName(v))
	return nil
}

// copyList returns a frozen list of copies of the elements of x.
func (vr *validator) copyList(x starlark.Iterable, path string) starlark.Value {
	n := len(vr.problems)
	var elems []starlark.Value
	for x := range starlark.Elements(x) {
		elems = append(elems, vr.copyData(x, indexPath(path, len(elems))))
	}
	if len(vr.problems) > n {
		return nil
	}
	list := starlark.NewList(elems)
	list.Freeze()
	return list
}

// enter marks container x as being copied, or reports a cycle.
func (vr *validator) enter(x starlark.Value, path string) bool {
	if vr.active[x] {
		vr.addf(path, "want JSON data, got cyclic %s", x.Type())
		return false
	}
	if vr.active == nil {
		vr.active = make(map[starlark.Value]bool)
	}
	vr.active[x] = true
	return true
}

// inRange reports whether number x is within the bounds of s.
func (s *Schema) inRange(x starlark.Value) bool {
	if s.min != nil {
		if lt, _ := starlark.Compare(syntax.LT, x, s.min); lt {
			return false
		}
	}
	if s.max != nil {
		if gt, _ := starlark.Compare(syntax.GT, x, s.max); gt {
			return false
		}
	}
	return true
}

func isFinite(f starlark.Float) bool {
	return !math.IsInf(float64(f), 0) && !math.IsNaN(float64(f))
}

// shortRepr returns the Starlark representation of v, cut short if long.
func shortRepr(v starlark.Value) string {
	const max = 40
	if s, ok := v.(starlark.String); ok && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut].String() + "…"
	}
	r := v.String()
	if len(r) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "…"
	}
	return r
}

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
