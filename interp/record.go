package interp

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// A Record is an immutable, ordered, string-keyed Starlark value of type
// "record". It is what an object schema validates to.
//
// Its fields are read as attributes (r.name) or by index (r["name"]);
// "name" in r tests for a field; iteration and len see the field names in
// order. The methods keys(), values(), items() and get(name, default=None)
// are also attributes, but a field of the same name hides the method.
// Records are equal (== and !=) when they have the same field names and
// equal values, whatever the order.
//
// A Record cannot be modified, but its values can be mutable if the
// Record has not been frozen; Freeze freezes the values.
type Record struct {
	name   string // used in error messages; "" means "record"
	keys   []string
	values []starlark.Value
	index  map[string]int // for larger records; nil if small
}

var (
	_ starlark.HasAttrs        = (*Record)(nil)
	_ starlark.IterableMapping = (*Record)(nil)
	_ starlark.Sequence        = (*Record)(nil)
	_ starlark.Comparable      = (*Record)(nil)
)

// NewRecord returns a Record with the given field names and values, in
// that order. It panics if the lengths differ or a name is repeated.
// The Record uses keys and values without copying them.
func NewRecord(keys []string, values []starlark.Value) *Record {
	if len(keys) != len(values) {
		panic(fmt.Sprintf("NewRecord: %d keys, %d values", len(keys), len(values)))
	}
	r := &Record{keys: keys, values: values}
	if len(keys) > 8 {
		r.index = make(map[string]int, len(keys))
	}
	for i, k := range keys {
		var dup bool
		if r.index != nil {
			_, dup = r.index[k]
			r.index[k] = i
		} else {
			dup = slices.Contains(keys[:i], k)
		}
		if dup {
			panic(fmt.Sprintf("NewRecord: duplicate key %q", k))
		}
	}
	return r
}

// WithName returns a Record with the same fields that calls itself name
// in error messages, as in `inputs has no field "whoo"`.
// Its Starlark type is still "record".
func (r *Record) WithName(name string) *Record {
	r2 := *r
	r2.name = name
	return &r2
}

// Name returns the name used in error messages ("record" by default).
func (r *Record) Name() string {
	if r.name == "" {
		return "record"
	}
	return r.name
}

// Field returns the value of the named field.
func (r *Record) Field(name string) (starlark.Value, bool) {
	if i := r.find(name); i >= 0 {
		return r.values[i], true
	}
	return nil, false
}

// Keys returns the field names, in order.
func (r *Record) Keys() []string { return slices.Clone(r.keys) }

// All iterates over the fields, in order.
func (r *Record) All() iter.Seq2[string, starlark.Value] {
	return func(yield func(string, starlark.Value) bool) {
		for i, k := range r.keys {
			if !yield(k, r.values[i]) {
				return
			}
		}
	}
}

func (r *Record) find(name string) int {
	if r.index != nil {
		if i, ok := r.index[name]; ok {
			return i
		}
		return -1
	}
	return slices.Index(r.keys, name)
}

func (r *Record) String() string {
	var buf strings.Builder
	buf.WriteString("record(")
	for i, k := range r.keys {
		if i > 0 {
			buf.WriteString(", ")
		}
		buf.WriteString(k)
		buf.WriteString(" = ")
		buf.WriteString(r.values[i].String())
	}
	buf.WriteByte(')')
	return buf.String()
}

// Type returns "record".
func (r *Record) Type() string { return "record" }

// Freeze freezes the values of r; r itself is immutable.
func (r *Record) Freeze() {
	for _, v := range r.values {
		v.Freeze()
	}
}

func (r *Record) Truth() starlark.Bool { return len(r.keys) > 0 }

// Hash combines the hashes of the fields, regardless of their order.
func (r *Record) Hash() (uint32, error) {
	var h uint32 = 0x9e3779b9
	for i, k := range r.keys {
		kh, _ := starlark.String(k).Hash()
		vh, err := r.values[i].Hash()
		if err != nil {
			return 0, err
		}
		h += kh*1000003 ^ vh
	}
	return h, nil
}

// Len returns the number of fields.
func (r *Record) Len() int { return len(r.keys) }

// Iterate iterates over the field names.
func (r *Record) Iterate() starlark.Iterator { return &recordIterator{keys: r.keys} }

// Get implements r[k] and k in r.
func (r *Record) Get(k starlark.Value) (starlark.Value, bool, error) {
	if k, ok := k.(starlark.String); ok {
		v, ok := r.Field(string(k))
		return v, ok, nil
	}
	return nil, false, nil
}

// Items returns the (name, value) pairs, in order.
func (r *Record) Items() []starlark.Tuple {
	items := make([]starlark.Tuple, len(r.keys))
	for i, k := range r.keys {
		items[i] = starlark.Tuple{starlark.String(k), r.values[i]}
	}
	return items
}

// Attr returns the named field, or else the named method.
// For an unknown name it returns an error such as
// `record has no field "whoo" (did you mean "who"?)`.
func (r *Record) Attr(name string) (starlark.Value, error) {
	if v, ok := r.Field(name); ok {
		return v, nil
	}
	if m, ok := recordMethods[name]; ok {
		return m.BindReceiver(r), nil
	}
	return nil, r.noField(name)
}

func (r *Record) noField(name string) error {
	msg := fmt.Sprintf("%s has no field %q", r.Name(), name)
	if n := Nearest(name, r.keys); n != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", n)
	}
	// Not a starlark.NoSuchAttrError, which would get a second hint.
	return noSuchFieldError(msg)
}

type noSuchFieldError string

func (e noSuchFieldError) Error() string { return string(e) }

// AttrNames returns the field names followed by the names of the
// methods that no field hides.
func (r *Record) AttrNames() []string {
	names := slices.Clone(r.keys)
	for _, m := range recordMethodNames {
		if r.find(m) < 0 {
			names = append(names, m)
		}
	}
	return names
}

// CompareSameType implements == and != between records.
func (r *Record) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	switch op {
	case syntax.EQL:
		return r.equal(y.(*Record), depth)
	case syntax.NEQ:
		eq, err := r.equal(y.(*Record), depth)
		return !eq, err
	}
	return false, fmt.Errorf("%s %s %s not implemented", r.Type(), op, y.Type())
}

func (r *Record) equal(y *Record, depth int) (bool, error) {
	if len(r.keys) != len(y.keys) {
		return false, nil
	}
	for i, k := range r.keys {
		yv, ok := y.Field(k)
		if !ok {
			return false, nil
		}
		if eq, err := starlark.EqualDepth(r.values[i], yv, depth-1); err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

type recordIterator struct{ keys []string }

func (it *recordIterator) Next(p *starlark.Value) bool {
	if len(it.keys) == 0 {
		return false
	}
	*p = starlark.String(it.keys[0])
	it.keys = it.keys[1:]
	return true
}

func (it *recordIterator) Done() {}

var recordMethodNames = []string{"get", "items", "keys", "values"}

var recordMethods = map[string]*starlark.Builtin{
	"get":    starlark.NewBuiltin("get", recordGet),
	"items":  starlark.NewBuiltin("items", recordItems),
	"keys":   starlark.NewBuiltin("keys", recordKeys),
	"values": starlark.NewBuiltin("values", recordValues),
}

func recordGet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var dflt starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &name, &dflt); err != nil {
		return nil, err
	}
	if v, ok := b.Receiver().(*Record).Field(name); ok {
		return v, nil
	}
	return dflt, nil
}

func recordItems(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	items := b.Receiver().(*Record).Items()
	elems := make([]starlark.Value, len(items))
	for i, item := range items {
		elems[i] = item
	}
	return starlark.NewList(elems), nil
}

func recordKeys(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	r := b.Receiver().(*Record)
	elems := make([]starlark.Value, len(r.keys))
	for i, k := range r.keys {
		elems[i] = starlark.String(k)
	}
	return starlark.NewList(elems), nil
}

func recordValues(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	return starlark.NewList(slices.Clone(b.Receiver().(*Record).values)), nil
}
