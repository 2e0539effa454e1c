package interp

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// starEval evaluates a Starlark expression for a test, with the schema
// module, struct and the given values predeclared.
func starEval(t testing.TB, expr string, env starlark.StringDict) starlark.Value {
	t.Helper()
	v, err := starEvalErr(expr, env)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func starEvalErr(expr string, env starlark.StringDict) (starlark.Value, error) {
	predeclared := starlark.StringDict{
		"schema": SchemaModule,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
	for k, v := range env {
		predeclared[k] = v
	}
	thread := &starlark.Thread{Name: "test"}
	return starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, predeclared)
}

// starExec executes a Starlark file for a test, as starEval.
func starExec(t testing.TB, src string, env starlark.StringDict) error {
	t.Helper()
	predeclared := starlark.StringDict{
		"schema": SchemaModule,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
	for k, v := range env {
		predeclared[k] = v
	}
	thread := &starlark.Thread{Name: "test"}
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "test.star", src, predeclared)
	return err
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	var evalErr *starlark.EvalError
	if errors.As(err, &evalErr) {
		return evalErr.Msg
	}
	return err.Error()
}

func TestFromJSON(t *testing.T) {
	for _, test := range []struct {
		in, want string
	}{
		{`null`, `None`},
		{` true `, `True`},
		{`false`, `False`},
		{`"a\"\u00e9\n"`, `"a\"é\n"`},
		{`0`, `0`},
		{`-0`, `0`},
		{`-42`, `-42`},
		{`12345678901234567890`, `12345678901234567890`},
		{`-123456789012345678901234567890`, `-123456789012345678901234567890`},
		{`1.0`, `1.0`},
		{`1e3`, `1000.0`},
		{`-2.5E-3`, `-0.0025`},
		{`1e-400`, `0.0`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`{"b": 1, "a": [1.5, "x", true, null], "c": {}}`, `{"b": 1, "a": [1.5, "x", True, None], "c": {}}`},
		{`{"a": 1, "b": 2, "a": 3}`, `{"a": 3, "b": 2}`},
		{`{"_meta": {"k": [[], [{}]]}}`, `{"_meta": {"k": [[], [{}]]}}`},
	} {
		v, err := FromJSON([]byte(test.in))
		if err != nil {
			t.Errorf("FromJSON(%s): %v", test.in, err)
			continue
		}
		if got := v.String(); got != test.want {
			t.Errorf("FromJSON(%s) = %s, want %s", test.in, got, test.want)
		}
		switch v := v.(type) {
		case *starlark.List:
			if err := v.Append(starlark.None); err != nil {
				t.Errorf("FromJSON(%s): append: %v", test.in, err)
			}
		case *starlark.Dict:
			if err := v.SetKey(starlark.String("new"), starlark.None); err != nil {
				t.Errorf("FromJSON(%s): SetKey: %v", test.in, err)
			}
		}
	}

	// Types, not just representations.
	v, _ := FromJSON([]byte(`[1, 1.0, 99999999999999999999]`))
	list := v.(*starlark.List)
	for i, want := range []string{"int", "float", "int"} {
		if got := list.Index(i).Type(); got != want {
			t.Errorf("element %d has type %s, want %s", i, got, want)
		}
	}
	want, _ := new(big.Int).SetString("99999999999999999999", 10)
	if got := list.Index(2).(starlark.Int).BigInt(); got.Cmp(want) != 0 {
		t.Errorf("big int = %v, want %v", got, want)
	}
}

func TestFromJSONErrors(t *testing.T) {
	for _, test := range []struct {
		in, want string
	}{
		{``, `decoding JSON at offset 0: unexpected end of JSON input`},
		{`{"a": 1,}`, `decoding JSON at offset 9: invalid character '}' looking for beginning of object key string`},
		{`[1, 2`, `decoding JSON at offset 5: unexpected end of JSON input`},
		{`1 2`, `decoding JSON at offset 3: invalid character '2' after top-level value`},
		{`{} x`, `decoding JSON at offset 4: invalid character 'x' after top-level value`},
		{`[1, 1e400]`, `decoding JSON at offset 4: number 1e400 out of range`},
		{`'a'`, `decoding JSON at offset 1: invalid character '\'' looking for beginning of value`},
	} {
		_, err := FromJSON([]byte(test.in))
		if got := errString(err); got != test.want {
			t.Errorf("FromJSON(%s): got error %s, want %s", test.in, got, test.want)
		}
	}
}

func TestToJSON(t *testing.T) {
	for _, test := range []struct {
		expr, want string
	}{
		{`None`, `null`},
		{`[True, False]`, `[true,false]`},
		{`(1, -2, 2 * 100000000000000000000)`, `[1,-2,200000000000000000000]`},
		{`[1.0, 0.5, -0.0, 1e20, 1e21, 1e-6, 1e-7, 123456.789, float(3)]`,
			`[1.0,0.5,-0.0,100000000000000000000.0,1e+21,0.000001,1e-7,123456.789,3.0]`},
		{`"<a href='x'>&</a>"`, `"<a href='x'>&</a>"`},
		{`"q\"b\\n\nt\tr\r\x01\x1f\x7f é 日本 \u2028"`, `"q\"b\\n\nt\tr\r\u0001\u001f` + "\x7f é 日本 \u2028" + `"`},
		{`{"b": [1, 2.0, "x"], "a": None, "t": (True, {})}`, `{"b":[1,2.0,"x"],"a":null,"t":[true,{}]}`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`struct(z = 1, a = [])`, `{"a":[],"z":1}`},
		{`rec`, `{"who":"x","n":[1]}`},
	} {
		env := starlark.StringDict{
			"rec": NewRecord([]string{"who", "n"}, []starlark.Value{starlark.String("x"), starlark.NewList([]starlark.Value{starlark.MakeInt(1)})}),
		}
		v := starEval(t, test.expr, env)
		got, err := ToJSON(v)
		if err != nil {
			t.Errorf("ToJSON(%s): %v", test.expr, err)
			continue
		}
		if string(got) != test.want {
			t.Errorf("ToJSON(%s) = %s, want %s", test.expr, got, test.want)
		}
	}

	// Invalid UTF-8 becomes U+FFFD, written as an escape.
	got, err := ToJSON(starlark.String("a\xffb\xe6\x97"))
	if want := `"a\ufffdb\ufffd\ufffd"`; err != nil || string(got) != want {
		t.Errorf("ToJSON(invalid UTF-8) = %q, %v; want %q", got, err, want)
	}

	// AppendJSON appends.
	got, err = AppendJSON([]byte("x="), starlark.MakeInt(1), "")
	if err != nil || string(got) != "x=1" {
		t.Errorf("AppendJSON = %q, %v", got, err)
	}
}

func TestToJSONErrors(t *testing.T) {
	for _, test := range []struct {
		expr, path, want string
	}{
		{`{"items": [1, 2, 3, lambda: 1]}`, "params", `params.items[3]: cannot encode function as JSON`},
		{`lambda: 1`, "", `cannot encode function as JSON`},
		{`[len]`, "", `[0]: cannot encode builtin_function_or_method as JSON`},
		{`{"a b": {"c": range(3)}}`, "", `["a b"].c: cannot encode range as JSON`},
		{`{"a b": {"c": range(3)}}`, "x", `x["a b"].c: cannot encode range as JSON`},
		{`{"m": {1: 2}}`, "p", `p.m: cannot encode dict with int key as JSON`},
		{`[float("nan")]`, "v", `v[0]: cannot encode nan as JSON`},
		{`{"x": float("-inf")}`, "", `x: cannot encode -inf as JSON`},
		{`struct(a = [1, struct(b = None, c = lambda: 1)])`, "", `a[1].c: cannot encode function as JSON`},
		{`cyclic`, "", `[1]: cannot encode cyclic list as JSON`},
		{`cyclicDict`, "d", `d.self: cannot encode cyclic dict as JSON`},
	} {
		cyclic := starlark.NewList([]starlark.Value{starlark.MakeInt(1)})
		cyclic.Append(cyclic)
		cyclicDict := new(starlark.Dict)
		cyclicDict.SetKey(starlark.String("self"), cyclicDict)
		v := starEval(t, test.expr, starlark.StringDict{"cyclic": cyclic, "cyclicDict": cyclicDict})
		got, err := AppendJSON([]byte("keep"), v, test.path)
		if errString(err) != test.want {
			t.Errorf("AppendJSON(%s, %q): got error %s, want %s", test.expr, test.path, errString(err), test.want)
		}
		if string(got) != "keep" {
			t.Errorf("AppendJSON(%s, %q) returned %q after error", test.expr, test.path, got)
		}
	}

	// The same list twice is not a cycle.
	l := starlark.NewList(nil)
	if got, err := ToJSON(starlark.Tuple{l, l}); err != nil || string(got) != "[[],[]]" {
		t.Errorf("ToJSON of shared list = %s, %v", got, err)
	}
}

func TestRecord(t *testing.T) {
	newRec := func() *Record {
		return NewRecord(
			[]string{"who", "n", "tags"},
			[]starlark.Value{starlark.String("x"), starlark.MakeInt(1), starlark.NewList([]starlark.Value{starlark.String("a")})})
	}
	r := newRec()
	env := starlark.StringDict{
		"r":        r,
		"same":     NewRecord([]string{"tags", "n", "who"}, []starlark.Value{starlark.NewList([]starlark.Value{starlark.String("a")}), starlark.MakeInt(1), starlark.String("x")}),
		"other":    NewRecord([]string{"who", "n", "tags"}, []starlark.Value{starlark.String("x"), starlark.MakeInt(2), starlark.NewList(nil)}),
		"shadow":   NewRecord([]string{"keys", "get"}, []starlark.Value{starlark.MakeInt(1), starlark.MakeInt(2)}),
		"inputs":   newRec().WithName("inputs"),
		"empty":    NewRecord(nil, nil),
		"frozenIn": newRec(),
	}
	env["frozenIn"].Freeze()
	src := `
def check(cond, msg):
    if not cond:
        fail(msg)

check(type(r) == "record", "type")
check(r.who == "x" and r.n == 1, "attrs")
check(r["who"] == "x", "index")
check("who" in r and "zz" not in r and 1 not in r, "in")
check(list(r) == ["who", "n", "tags"], "iteration")
check(len(r) == 3, "len")
check(r.keys() == ["who", "n", "tags"], "keys")
check(r.values() == ["x", 1, ["a"]], "values")
check(r.items() == [("who", "x"), ("n", 1), ("tags", ["a"])], "items")
check(r.get("who") == "x" and r.get("zz") == None and r.get("zz", 3) == 3, "get")
check(dict(r) == {"who": "x", "n": 1, "tags": ["a"]}, "dict(r)")
check(r == same, "== in any order")
check(r != other and not (r == other), "!=")
check(r == inputs, "name is not part of equality")
check(str(r) == 'record(who = "x", n = 1, tags = ["a"])', str(r))
check(str(empty) == "record()" and not empty and r, "truth")
check(shadow.keys == 1 and shadow.get == 2 and shadow.items() == [("keys", 1), ("get", 2)], "fields hide methods")
check(hasattr(r, "who") and not hasattr(r, "whoo") and getattr(r, "whoo", 5) == 5, "hasattr")
check(dir(r) == ["get", "items", "keys", "n", "tags", "values", "who"], str(dir(r)))
r.tags.append("b")   # not frozen
check(r.tags == ["a", "b"], "append")
`
	if err := starExec(t, src, env); err != nil {
		t.Fatal(errString(err))
	}

	for _, test := range []struct {
		src, want string
	}{
		{`r.whoo`, `record has no field "whoo" (did you mean "who"?)`},
		{`inputs.whoo`, `inputs has no field "whoo" (did you mean "who"?)`},
		{`r.zzz`, `record has no field "zzz"`},
		{`r["zz"]`, `key "zz" not in record`},
		{`r < same`, `record < record not implemented`},
		{`frozenIn.tags.append(1)`, `append: cannot append to frozen list`},
		{`{r: 1}`, `unhashable type: list`},
		{`{inputs.who: empty}`, ``},
	} {
		_, err := starEvalErr(test.src, env)
		if test.want == "" {
			if err != nil {
				t.Errorf("%s: %v", test.src, err)
			}
			continue
		}
		if got := errString(err); got != test.want {
			t.Errorf("%s: got error %q, want %q", test.src, got, test.want)
		}
	}

	// Hash: records of hashable values, equal in any order.
	a := NewRecord([]string{"a", "b"}, []starlark.Value{starlark.MakeInt(1), starlark.String("x")})
	b := NewRecord([]string{"b", "a"}, []starlark.Value{starlark.String("x"), starlark.MakeInt(1)})
	ha, errA := a.Hash()
	hb, errB := b.Hash()
	if errA != nil || errB != nil || ha != hb {
		t.Errorf("hashes of equal records: %v %v, %v %v", ha, errA, hb, errB)
	}

	// Go API.
	if v, ok := r.Field("n"); !ok || v != starlark.MakeInt(1) {
		t.Errorf("Field(n) = %v, %v", v, ok)
	}
	if _, ok := r.Field("zz"); ok {
		t.Errorf("Field(zz) found")
	}
	if got := strings.Join(r.Keys(), ","); got != "who,n,tags" {
		t.Errorf("Keys = %s", got)
	}
	var names []string
	for k := range r.All() {
		names = append(names, k)
	}
	if got := strings.Join(names, ","); got != "who,n,tags" {
		t.Errorf("All = %s", got)
	}
	if got := strings.Join(env["shadow"].(*Record).AttrNames(), ","); got != "keys,get,items,values" {
		t.Errorf("AttrNames = %s", got)
	}
	if r.Name() != "record" || env["inputs"].(*Record).Name() != "inputs" {
		t.Errorf("Name")
	}

	// A large record uses an index.
	var keys []string
	var values []starlark.Value
	for i := range 20 {
		keys = append(keys, "f"+strconv.Itoa(i))
		values = append(values, starlark.MakeInt(i))
	}
	big := NewRecord(keys, values)
	if v, ok := big.Field("f17"); !ok || v != starlark.MakeInt(17) {
		t.Errorf("big.Field(f17) = %v, %v", v, ok)
	}
	if _, ok := big.Field("f20"); ok {
		t.Errorf("big.Field(f20) found")
	}

	for _, keys := range [][]string{{"a", "a"}, append(keys[:19:19], "f3")} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRecord(%q) did not panic", keys)
				}
			}()
			NewRecord(keys, make([]starlark.Value, len(keys)))
		}()
	}
}

// jsonEquivalent reports whether two values decoded by encoding/json
// with UseNumber are equal, with numbers compared by value.
func jsonEquivalent(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEquivalent(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEquivalent(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		xi, xok := new(big.Int).SetString(string(x), 10)
		yi, yok := new(big.Int).SetString(string(y), 10)
		if xok && yok {
			return xi.Cmp(yi) == 0
		}
		if xok != yok {
			return false // int vs float
		}
		xf, errX := strconv.ParseFloat(string(x), 64)
		yf, errY := strconv.ParseFloat(string(y), 64)
		return errX == nil && errY == nil && xf == yf
	default:
		return x == y
	}
}

func decodeUseNumber(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

// deepEqual compares Starlark values without a depth limit to speak of.
func deepEqual(x, y starlark.Value) (bool, error) {
	return starlark.EqualDepth(x, y, 1<<20)
}

func FuzzJSONRoundTrip(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1.5,"x",null,true]`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data)
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("FromJSON(%q) accepted invalid JSON", data)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "out of range") {
				return // a float too large
			}
			t.Fatalf("FromJSON(%q): %v", data, err)
		}
		out, err := ToJSON(v)
		if err != nil {
			t.Fatalf("ToJSON(FromJSON(%q)): %v", data, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, out); err != nil || !bytes.Equal(compact.Bytes(), out) {
			t.Fatalf("ToJSON output %q is not compact JSON (%v)", out, err)
		}
		v2, err := FromJSON(out)
		if err != nil {
			t.Fatalf("FromJSON(ToJSON(FromJSON(%q))) = FromJSON(%q): %v", data, out, err)
		}
		if eq, err := deepEqual(v, v2); err != nil || !eq {
			t.Fatalf("round trip of %q via %q: %v != %v (%v)", data, out, v, v2, err)
		}
		if out2, err := ToJSON(v2); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("second encoding of %q: %q, %v; want %q", data, out2, err, out)
		}
		if !jsonEquivalent(decodeUseNumber(t, data), decodeUseNumber(t, out)) {
			t.Fatalf("ToJSON(FromJSON(%q)) = %q: not equivalent", data, out)
		}
	})
}
