package interp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.starlark.net/starlark"
)

// PatchJSON encodes v as JSON, reusing the bytes of orig, the JSON v was
// decoded from, wherever v is unchanged: an untouched member keeps its exact
// bytes (number format, escapes, spacing), and only what changed is
// re-encoded. changed reports whether v differs from orig at all; when it
// does not, out is orig itself.
func PatchJSON(orig []byte, v starlark.Value, path string) (out []byte, changed bool, err error) {
	trimmed := bytes.TrimSpace(orig)
	if o, ok := v.(*Object); ok {
		v = o.dict
	}
	switch v := v.(type) {
	case *starlark.Dict:
		if len(trimmed) > 0 && trimmed[0] == '{' {
			return patchObject(orig, v, path)
		}
	case *starlark.List:
		if len(trimmed) > 0 && trimmed[0] == '[' {
			elems := make([]starlark.Value, v.Len())
			for i := range elems {
				elems[i] = v.Index(i)
			}
			return patchArray(orig, elems, path)
		}
	case starlark.Tuple:
		if len(trimmed) > 0 && trimmed[0] == '[' {
			return patchArray(orig, v, path)
		}
	default:
		if prev, err := FromJSON(orig); err == nil {
			if eq, err := starlark.Equal(prev, v); err == nil && eq {
				return orig, false, nil
			}
		}
	}
	out, err = AppendJSON(nil, v, path)
	return out, true, err
}

func patchObject(orig []byte, v *starlark.Dict, path string) ([]byte, bool, error) {
	members := map[string]json.RawMessage{}
	var order []string
	dec := json.NewDecoder(bytes.NewReader(orig))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, false, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false, err
		}
		if _, dup := members[key]; !dup {
			order = append(order, key)
		}
		members[key] = raw
	}
	items := v.Items()
	changed := len(items) != len(order)
	out := []byte{'{'}
	for i, item := range items {
		key, ok := starlark.AsString(item[0])
		if !ok {
			return nil, false, fmt.Errorf("%s: dict keys must be strings, got %s", path, item[0].Type())
		}
		if i > 0 {
			out = append(out, ',')
		}
		if !changed && order[i] != key {
			changed = true
		}
		kb, _ := AppendJSON(nil, starlark.String(key), path)
		out = append(append(out, kb...), ':')
		sub := fieldPath(path, key)
		var val []byte
		var err error
		if raw, ok := members[key]; ok {
			var c bool
			val, c, err = PatchJSON(raw, item[1], sub)
			changed = changed || c
		} else {
			val, err = AppendJSON(nil, item[1], sub)
			changed = true
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, val...)
	}
	if !changed {
		return orig, false, nil
	}
	return append(out, '}'), true, nil
}

func patchArray(orig []byte, elems []starlark.Value, path string) ([]byte, bool, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(orig, &raws); err != nil {
		return nil, false, err
	}
	changed := len(raws) != len(elems)
	out := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		sub := fmt.Sprintf("%s[%d]", path, i)
		var val []byte
		var err error
		if i < len(raws) {
			var c bool
			val, c, err = PatchJSON(raws[i], e, sub)
			changed = changed || c
		} else {
			val, err = AppendJSON(nil, e, sub)
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, val...)
	}
	if !changed {
		return orig, false, nil
	}
	return append(out, ']'), true, nil
}
