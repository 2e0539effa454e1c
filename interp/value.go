package interp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// FromJSON decodes one JSON value into Starlark values:
// objects become *starlark.Dict with keys in document order (a repeated
// key keeps its first position and its last value), arrays become
// *starlark.List, strings starlark.String, true and false starlark.Bool,
// null starlark.None. A number without fraction or exponent becomes an
// exact starlark.Int of any size; any other number ("1.0", "1e3")
// becomes a starlark.Float. The values are not frozen.
//
// Errors give the byte offset in data. Data after the value, other than
// white space, is an error, and so is a number too large for a float.
func FromJSON(data []byte) (starlark.Value, error) {
	return fromJSON(data, nil)
}

// fromJSON decodes data; with a path, objects become *Object named by
// their place under it.
func fromJSON(data []byte, path *string) (starlark.Value, error) {
	if !json.Valid(data) {
		err := json.Unmarshal(data, new(any))
		var serr *json.SyntaxError
		if errors.As(err, &serr) {
			return nil, fmt.Errorf("decoding JSON at offset %d: %s", serr.Offset, serr)
		}
		return nil, fmt.Errorf("decoding JSON: %v", err) // not reached
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return decodeJSON(dec, path)
}

// decodeJSON decodes the next value from dec, which holds valid JSON;
// with a path, the value's place, objects become *Object.
func decodeJSON(dec *json.Decoder, path *string) (starlark.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("decoding JSON at offset %d: %v", dec.InputOffset(), err)
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			d := new(starlark.Dict)
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("decoding JSON at offset %d: %v", dec.InputOffset(), err)
				}
				v, err := decodeJSON(dec, under(path, fieldPath, k.(string)))
				if err != nil {
					return nil, err
				}
				d.SetKey(starlark.String(k.(string)), v) // can't fail: unfrozen, string key
			}
			_, err = dec.Token() // '}'
			if path != nil {
				return &Object{dict: d, path: *path}, err
			}
			return d, err
		case '[':
			var elems []starlark.Value
			for dec.More() {
				v, err := decodeJSON(dec, under(path, indexPath, len(elems)))
				if err != nil {
					return nil, err
				}
				elems = append(elems, v)
			}
			_, err = dec.Token() // ']'
			return starlark.NewList(elems), err
		}
	case string:
		return starlark.String(tok), nil
	case json.Number:
		v, err := jsonNumber(string(tok))
		if err != nil {
			return nil, fmt.Errorf("decoding JSON at offset %d: %v", dec.InputOffset()-int64(len(tok)), err)
		}
		return v, nil
	case bool:
		return starlark.Bool(tok), nil
	case nil:
		return starlark.None, nil
	}
	return nil, fmt.Errorf("decoding JSON at offset %d: unexpected %v", dec.InputOffset(), tok)
}

// under returns the path of member k of the value at path, if any.
func under[K any](path *string, join func(string, K) string, k K) *string {
	if path == nil {
		return nil
	}
	p := join(*path, k)
	return &p
}

// jsonNumber converts a valid JSON number to an Int or a Float.
func jsonNumber(s string) (starlark.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return starlark.MakeBigInt(b), nil
		}
		return nil, fmt.Errorf("invalid number %s", s) // not reached
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s out of range", s)
	}
	return starlark.Float(f), nil
}

// ToJSON encodes v as compact JSON. See [AppendJSON].
func ToJSON(v starlark.Value) ([]byte, error) {
	return AppendJSON(nil, v, "")
}

// AppendJSON appends the compact JSON encoding of v to buf.
//
// It encodes None, bool, int (of any size), float (finite only), string,
// list and tuple (as arrays), dict and object with string keys, record
// and struct (as objects). Dicts, objects and records keep the order of
// their keys; structs are in key order. Strings are not HTML-escaped; invalid UTF-8 becomes
// U+FFFD. A float always has a '.' or an exponent, so that it decodes as
// a float again.
//
// An error names the path of the value at fault, built on path, as in
// `params.items[3]: cannot encode function as JSON`.
func AppendJSON(buf []byte, v starlark.Value, path string) ([]byte, error) {
	e := jsonEncoder{buf: buf}
	if err := e.encode(v, path); err != nil {
		return buf, err
	}
	return e.buf, nil
}

type jsonEncoder struct {
	buf    []byte
	active map[starlark.Value]bool // containers being encoded, to catch cycles
}

func (e *jsonEncoder) encode(v starlark.Value, path string) error {
	if o, ok := v.(*Object); ok {
		v = o.dict
	}
	switch v := v.(type) {
	case starlark.NoneType:
		e.buf = append(e.buf, "null"...)
	case starlark.Bool:
		e.buf = strconv.AppendBool(e.buf, bool(v))
	case starlark.Int:
		if i, ok := v.Int64(); ok {
			e.buf = strconv.AppendInt(e.buf, i, 10)
		} else {
			e.buf = v.BigInt().Append(e.buf, 10)
		}
	case starlark.Float:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return pathErrorf(path, "cannot encode %s as JSON", v)
		}
		e.buf = appendJSONFloat(e.buf, f)
	case starlark.String:
		e.buf = jsonstr.Append(e.buf, string(v))
	case *starlark.List:
		return e.array(v, v.Len(), v.Index, path)
	case starlark.Tuple:
		return e.array(nil, len(v), func(i int) starlark.Value { return v[i] }, path)
	case *starlark.Dict:
		if err := e.enter(v, path); err != nil {
			return err
		}
		e.buf = append(e.buf, '{')
		for i, item := range v.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return pathErrorf(path, "cannot encode dict with %s key as JSON", typeName(item[0]))
			}
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.member(string(k), item[1], path); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
		delete(e.active, v)
	case *Record:
		e.buf = append(e.buf, '{')
		for i, k := range v.keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.member(k, v.values[i], path); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	case *starlarkstruct.Struct:
		e.buf = append(e.buf, '{')
		for i, k := range v.AttrNames() {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			x, err := v.Attr(k)
			if err != nil {
				return pathErrorf(fieldPath(path, k), "%v", err)
			}
			if err := e.member(k, x, path); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	default:
		return pathErrorf(path, "cannot encode %s as JSON", typeName(v))
	}
	return nil
}

// enter marks container x as being encoded, or reports a cycle.
func (e *jsonEncoder) enter(x starlark.Value, path string) error {
	if e.active[x] {
		return pathErrorf(path, "cannot encode cyclic %s as JSON", x.Type())
	}
	if e.active == nil {
		e.active = make(map[starlark.Value]bool)
	}
	e.active[x] = true
	return nil
}

// array encodes a list (when list is not nil) or a tuple.
func (e *jsonEncoder) array(list *starlark.List, n int, index func(int) starlark.Value, path string) error {
	if list != nil {
		if err := e.enter(list, path); err != nil {
			return err
		}
		defer delete(e.active, list)
	}
	e.buf = append(e.buf, '[')
	for i := range n {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.encode(index(i), indexPath(path, i)); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *jsonEncoder) member(k string, v starlark.Value, path string) error {
	e.buf = jsonstr.Append(e.buf, k)
	e.buf = append(e.buf, ':')
	return e.encode(v, fieldPath(path, k))
}

// appendJSONFloat appends finite f in the style of encoding/json,
// adding ".0" if the result would otherwise read as an integer.
func appendJSONFloat(buf []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9.
		if n := len(buf); n-start >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	} else if bytes.IndexByte(buf[start:], '.') < 0 {
		buf = append(buf, ".0"...)
	}
	return buf
}

// typeName returns the Starlark type name of v, with "None" for None.
func typeName(v starlark.Value) string {
	if v == starlark.None {
		return "None"
	}
	return v.Type()
}

// pathErrorf returns an error whose message is prefixed by path, if any.
func pathErrorf(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return errors.New(msg)
}

// fieldPath returns the path of field name within path:
// path.name, or path["name"] if name is not an identifier.
func fieldPath(path, name string) string {
	if !isIdent(name) {
		return path + "[" + starlark.String(name).String() + "]"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// indexPath returns the path of element i within path: path[i].
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// isIdent reports whether s is a Starlark identifier (keywords included).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
