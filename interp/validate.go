package interp

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

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
		return vr.validString(s, v, path)

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
		return vr.validList(s, v, path)

	case KindDict:
		return vr.validDict(s, v, path)

	case KindEnum:
		if !slices.Contains(s.enum, string(v.(starlark.String))) {
			vr.addf(path, "want %s, got %s", s.Describe(), vr.repr(v))
			return nil
		}
		return v

	case KindAny:
		return vr.copyData(v, path)

	case KindObject:
		return vr.validObject(s, v, path)
	}
	panic(fmt.Sprintf("invalid schema kind %v", s.kind))
}

// validString validates the string v for s, as validate does.
func (vr *validator) validString(s *Schema, v starlark.Value, path string) starlark.Value {
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
}

// validList validates the list or tuple v for s, as validate does.
func (vr *validator) validList(s *Schema, v starlark.Value, path string) starlark.Value {
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
}

// validDict validates the dict, record or struct v for the dict schema
// s, as validate does.
func (vr *validator) validDict(s *Schema, v starlark.Value, path string) starlark.Value {
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
}

// validObject validates the dict, record or struct v for the object
// schema s, field by field, as validate does.
func (vr *validator) validObject(s *Schema, v starlark.Value, path string) starlark.Value {
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
			} else if len(s.names) == 0 {
				vr.addf(fieldPath(path, k), "unknown field (it takes none)")
			} else {
				vr.addf(fieldPath(path, k), "unknown field (want one of %s)", strings.Join(s.names, ", "))
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
