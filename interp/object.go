package interp

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// An Object is a JSON object of a message, of Starlark type "object": a
// mutable dict with string keys whose members also read and write as
// attributes, so that a plug writes message.params.prompt[0].text.
//
// Indexing, in, len, iteration, the dict methods (a member of the same
// name hides a method: params.update is the member), dict(o) and
// json.encode work as on a dict. Objects are equal (== and !=) to
// objects with equal members; an object is never equal to a dict, whose
// type differs: compare members, or the json.encode of both.
//
// It has a type of its own because Starlark lets the left operand of ==
// compare when the type names agree, and a dict's comparison cannot take
// another type.
type Object struct {
	Unhashable[*Object]

	dict *starlark.Dict
	path string // where it was decoded, as in message.params.prompt[0]
}

var (
	_ starlark.HasAttrs        = (*Object)(nil)
	_ starlark.HasSetField     = (*Object)(nil)
	_ starlark.HasSetKey       = (*Object)(nil)
	_ starlark.IterableMapping = (*Object)(nil)
	_ starlark.Sequence        = (*Object)(nil)
	_ starlark.Comparable      = (*Object)(nil)
)

// DecodeObjects is FromJSON, except that JSON objects become *Object,
// named in error messages by their place under path (message.params).
func DecodeObjects(data []byte, path string) (starlark.Value, error) {
	return fromJSON(data, &path)
}

func (o *Object) String() string       { return o.dict.String() }
func (o *Object) Type() string         { return "object" }
func (o *Object) Freeze()              { o.dict.Freeze() }
func (o *Object) Truth() starlark.Bool { return o.dict.Truth() }
func (o *Object) Len() int             { return o.dict.Len() }

func (o *Object) Iterate() starlark.Iterator { return o.dict.Iterate() }
func (o *Object) Items() []starlark.Tuple    { return o.dict.Items() }

func (o *Object) Get(k starlark.Value) (starlark.Value, bool, error) { return o.dict.Get(k) }

func (o *Object) SetKey(k, v starlark.Value) error { return o.dict.SetKey(k, v) }

// SetField is o.name = v: it sets the member name.
func (o *Object) SetField(name string, v starlark.Value) error {
	return o.dict.SetKey(starlark.String(name), v)
}

// Attr returns the member name, else the dict method name; for anything
// else an error that names the path and the members, as in
// `message.params.promt: no such field (did you mean "prompt"?); fields: prompt, sessionId`.
func (o *Object) Attr(name string) (starlark.Value, error) {
	if v, ok, _ := o.dict.Get(starlark.String(name)); ok {
		return v, nil
	}
	if m, err := o.dict.Attr(name); m != nil || err != nil {
		return m, err
	}
	keys := o.keys()
	msg := fieldPath(cmp.Or(o.path, "object"), name) + ": no such field"
	if n := Nearest(name, keys); n != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", n)
	}
	if len(keys) == 0 {
		msg += "; the object is empty"
	} else {
		msg += "; fields: " + strings.Join(keys, ", ")
	}
	// Not a starlark.NoSuchAttrError, which would get a second hint.
	return nil, noSuchFieldError(msg)
}

// AttrNames returns the members that are identifiers, then the dict
// methods that no member hides.
func (o *Object) AttrNames() []string {
	var names []string
	for _, k := range o.keys() {
		if isIdent(k) {
			names = append(names, k)
		}
	}
	for _, m := range o.dict.AttrNames() {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// keys returns the string keys, in order.
func (o *Object) keys() []string {
	keys := make([]string, 0, o.dict.Len())
	for _, k := range o.dict.Keys() {
		if s, ok := k.(starlark.String); ok {
			keys = append(keys, string(s))
		}
	}
	return keys
}

// CompareSameType implements == and != between objects.
func (o *Object) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	switch op {
	case syntax.EQL, syntax.NEQ:
		return starlark.CompareDepth(op, o.dict, y.(*Object).dict, depth)
	}
	return false, fmt.Errorf("object %s object not implemented", op)
}
