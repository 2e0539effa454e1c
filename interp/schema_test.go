package interp

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

func TestSchemaDescribe(t *testing.T) {
	for _, test := range []struct {
		expr, want string
	}{
		{`schema.string()`, `string`},
		{`schema.string(min_len = 1)`, `string (length ≥ 1)`},
		{`schema.string(max_len = 3, pattern = "^a")`, `string (length ≤ 3, pattern "^a")`},
		{`schema.string(min_len = 1, max_len = 3)`, `string (length ≥ 1 and ≤ 3)`},
		{`schema.int()`, `int`},
		{`schema.int(min = 1)`, `int ≥ 1`},
		{`schema.int(max = 9)`, `int ≤ 9`},
		{`schema.int(min = -1, max = 9)`, `int ≥ -1 and ≤ 9`},
		{`schema.float(min = 0, max = 0.5)`, `float ≥ 0 and ≤ 0.5`},
		{`schema.bool()`, `bool`},
		{`schema.any()`, `any`},
		{`schema.list(schema.string())`, `list of string`},
		{`schema.list(schema.int(min = 1), min_len = 1)`, `list of int ≥ 1 (length ≥ 1)`},
		{`schema.list(schema.string(min_len = 1))`, `list of (string (length ≥ 1))`},
		{`schema.list(schema.list(schema.bool()))`, `list of (list of bool)`},
		{`schema.list(schema.enum("a", "b"))`, `list of (one of "a", "b")`},
		{`schema.list(schema.optional(schema.int()))`, `list of (int or None)`},
		{`schema.dict(schema.int())`, `dict of int`},
		{`schema.dict(schema.object(a = schema.int()))`, `dict of object{a: int}`},
		{`schema.enum("a", "b")`, `one of "a", "b"`},
		{`schema.optional(schema.string())`, `string or None`},
		{`schema.optional(schema.enum("a"))`, `one of "a" or None`},
		{`schema.optional(schema.list(schema.int()))`, `(list of int) or None`},
		{`schema.optional(schema.optional(schema.int()))`, `int or None`},
		{`schema.object()`, `object{}`},
		{`schema.object(who = schema.string(), n = schema.optional(schema.int()))`, `object{who: string, n?: int}`},
		{`schema.object(a = schema.int(default = 1), b = schema.object(c = schema.bool()))`, `object{a?: int, b: object{c: bool}}`},
		{`schema.object({"a b": schema.int(), "doc": schema.string()})`, `object{"a b": int, doc: string}`},
	} {
		v := starEval(t, test.expr, nil)
		s, ok := v.(*Schema)
		if !ok {
			t.Errorf("%s = %s, want schema", test.expr, v.Type())
			continue
		}
		if got := s.Describe(); got != test.want {
			t.Errorf("%s.Describe() = %s, want %s", test.expr, got, test.want)
		}
		if got, want := s.String(), "<schema "+test.want+">"; got != want {
			t.Errorf("%s.String() = %s, want %s", test.expr, got, want)
		}
		if s.Type() != "schema" {
			t.Errorf("%s.Type() = %s", test.expr, s.Type())
		}
	}
}

func TestSchemaValidate(t *testing.T) {
	for _, test := range []struct {
		schema, value string
		want          string // repr of the result, or the error
	}{
		// string
		{`schema.string()`, `"x"`, `"x"`},
		{`schema.string()`, `1`, `inputs: want string, got int`},
		{`schema.string()`, `None`, `inputs: want string, got None`},
		{`schema.string(min_len = 3)`, `"ab"`, `inputs: want string (length ≥ 3), got "ab" (length 2)`},
		{`schema.string(max_len = 2)`, `"éé"`, `"éé"`},
		{`schema.string(max_len = 2)`, `"abc"`, `inputs: want string (length ≤ 2), got "abc" (length 3)`},
		{`schema.string(pattern = "^[a-z]+$")`, `"abc"`, `"abc"`},
		{`schema.string(pattern = "^[a-z]+$")`, `"A1"`, `inputs: want string (pattern "^[a-z]+$"), got "A1"`},
		{`schema.string(pattern = "b")`, `"abc"`, `"abc"`},
		{`schema.string(pattern = "^x")`, `"y" * 50`, `inputs: want string (pattern "^x"), got "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"…`},

		// int
		{`schema.int()`, `-3`, `-3`},
		{`schema.int()`, `1.0`, `inputs: want int, got float`},
		{`schema.int()`, `True`, `inputs: want int, got bool`},
		{`schema.int(min = 1)`, `0`, `inputs: want int ≥ 1, got 0`},
		{`schema.int(min = 1)`, `"1"`, `inputs: want int ≥ 1, got string`},
		{`schema.int(max = 10)`, `11`, `inputs: want int ≤ 10, got 11`},
		{`schema.int(min = 1, max = 10)`, `10`, `10`},
		{`schema.int(min = 1, max = 10)`, `0`, `inputs: want int ≥ 1 and ≤ 10, got 0`},
		{`schema.int()`, `123456789012345678901234567890`, `123456789012345678901234567890`},

		// float
		{`schema.float()`, `3`, `3.0`},
		{`schema.float()`, `2.5`, `2.5`},
		{`schema.float()`, `"x"`, `inputs: want float, got string`},
		{`schema.float()`, `float("nan")`, `inputs: want float, got nan`},
		{`schema.float()`, `float("inf")`, `inputs: want float, got +inf`},
		{`schema.float()`, `2 * 10 * 400`, `8000.0`},
		{`schema.float(min = 0.5)`, `0`, `inputs: want float ≥ 0.5, got 0`},
		{`schema.float(max = 1)`, `1.5`, `inputs: want float ≤ 1, got 1.5`},

		// bool
		{`schema.bool()`, `True`, `True`},
		{`schema.bool()`, `1`, `inputs: want bool, got int`},

		// list
		{`schema.list(schema.string())`, `["a", "b"]`, `["a", "b"]`},
		{`schema.list(schema.string())`, `("a", "b")`, `["a", "b"]`},
		{`schema.list(schema.string())`, `"ab"`, `inputs: want list of string, got string`},
		{`schema.list(schema.string())`, `["a", 1, "b", None]`, "inputs[1]: want string, got int\ninputs[3]: want string, got None"},
		{`schema.list(schema.string(), min_len = 1)`, `[]`, `inputs: want list of string (length ≥ 1), got length 0`},
		{`schema.list(schema.string(), max_len = 1)`, `["a", 2]`, "inputs: want list of string (length ≤ 1), got length 2\ninputs[1]: want string, got int"},
		{`schema.list(schema.float())`, `[1, 2.5]`, `[1.0, 2.5]`},

		// dict
		{`schema.dict(schema.int())`, `{"a": 1, "b": 2}`, `{"a": 1, "b": 2}`},
		{`schema.dict(schema.int())`, `{"a": 1, "b c": "x", "d": None}`, "inputs[\"b c\"]: want int, got string\ninputs.d: want int, got None"},
		{`schema.dict(schema.int())`, `{1: 2, "a": "x"}`, "inputs: want dict of int, got dict with int key\ninputs.a: want int, got string"},
		{`schema.dict(schema.int())`, `[1]`, `inputs: want dict of int, got list`},
		{`schema.dict(schema.int())`, `struct(b = 1, a = 2)`, `{"a": 2, "b": 1}`},
		{`schema.dict(schema.float())`, `rec`, `{"who": 1.0, "n": 2.0}`},

		// enum
		{`schema.enum("a", "b")`, `"b"`, `"b"`},
		{`schema.enum("a", "b")`, `"c"`, `inputs: want one of "a", "b", got "c"`},
		{`schema.enum("a", "b")`, `1`, `inputs: want one of "a", "b", got int`},

		// optional
		{`schema.optional(schema.int())`, `None`, `None`},
		{`schema.optional(schema.int())`, `3`, `3`},
		{`schema.optional(schema.int())`, `"x"`, `inputs: want int or None, got string`},
		{`schema.optional(schema.int(min = 1))`, `0`, `inputs: want int ≥ 1, got 0`},
		{`schema.optional(schema.list(schema.int()))`, `[1, "x"]`, `inputs[1]: want int, got string`},

		// any
		{`schema.any()`, `{"a": [1, (2, None)], "b": 1.5}`, `{"a": [1, [2, None]], "b": 1.5}`},
		{`schema.any()`, `rec`, `record(who = 1, n = 2)`},
		{`schema.any()`, `struct(b = 1, a = 2)`, `record(a = 2, b = 1)`},
		{`schema.any()`, `lambda: 1`, `inputs: want JSON data, got function`},
		{`schema.any()`, `{"a": [len], 1: 2}`, "inputs.a[0]: want JSON data, got builtin_function_or_method\ninputs: want JSON data, got dict with int key"},
		{`schema.any()`, `[float("nan")]`, `inputs[0]: want JSON data, got nan`},
		{`schema.any()`, `cyclic`, `inputs[1]: want JSON data, got cyclic list`},

		// object
		{`schema.object(who = schema.string())`, `{"who": "x"}`, `record(who = "x")`},
		{`schema.object(who = schema.string())`, `struct(who = "x")`, `record(who = "x")`},
		{`schema.object(who = schema.int(), n = schema.int())`, `rec`, `record(who = 1, n = 2)`},
		{`schema.object(who = schema.string())`, `{"whoo": "x"}`, "inputs.who: required field missing (want string)\ninputs.whoo: unknown field (did you mean \"who\"?)"},
		{`schema.object(who = schema.string())`, `{"who": "x", "whoo": "x"}`, `inputs.whoo: unknown field (want one of who)`},
		{`schema.object(who = schema.string())`, `{"who": "x", "zzz": 1}`, `inputs.zzz: unknown field (want one of who)`},
		{`schema.object(who = schema.string())`, `{1: "x", "who": "y"}`, `inputs: want object{who: string}, got dict with int key`},
		{`schema.object(who = schema.string())`, `["x"]`, `inputs: want object{who: string}, got list`},
		{`schema.object(who = schema.string())`, `None`, `inputs: want object{who: string}, got None`},
		{`schema.object(b = schema.string(), a = schema.int(default = 1), c = schema.optional(schema.int()))`, `{"b": "x"}`, `record(b = "x", a = 1, c = None)`},
		{`schema.object(b = schema.string(), a = schema.int(default = 1))`, `{"a": 2, "b": "x"}`, `record(b = "x", a = 2)`},
		{`schema.object(mode = schema.enum("a", "b"), repo = schema.object(branch = schema.string()))`, `{"mode": "c", "repo": {}}`,
			"inputs.mode: want one of \"a\", \"b\", got \"c\"\ninputs.repo.branch: required field missing (want string)"},
		{`schema.object(repo = schema.object(branch = schema.string(default = "main"), depth = schema.int(default = 1)))`, `{}`,
			`record(repo = record(branch = "main", depth = 1))`},
		{`schema.object(repo = schema.object(branch = schema.string()))`, `{}`,
			`inputs.repo: required field missing (want object{branch: string})`},
	} {
		cyclic := starlark.NewList([]starlark.Value{starlark.MakeInt(1)})
		cyclic.Append(cyclic)
		env := starlark.StringDict{
			"rec":    NewRecord([]string{"who", "n"}, []starlark.Value{starlark.MakeInt(1), starlark.MakeInt(2)}),
			"cyclic": cyclic,
		}
		s := starEval(t, test.schema, nil).(*Schema)
		v := starEval(t, test.value, env)
		res, err := s.Validate(v, "inputs")
		var got string
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Errorf("%s.Validate(%s): error %T is not a *ValidationError", test.schema, test.value, err)
			}
			got = err.Error()
		} else {
			got = res.String()
			if err := checkFrozen(res); err != nil {
				t.Errorf("%s.Validate(%s): %v", test.schema, test.value, err)
			}
		}
		if got != test.want {
			t.Errorf("%s.Validate(%s) = %s, want %s", test.schema, test.value, got, test.want)
		}
	}
}

func TestSchemaValidateAbsent(t *testing.T) {
	for _, test := range []struct {
		schema, want string
	}{
		{`schema.string()`, `required field missing (want string)`},
		{`schema.string(default = "x")`, `"x"`},
		{`schema.int(default = 3)`, `3`},
		{`schema.float(default = 3)`, `3.0`},
		{`schema.bool(default = False)`, `False`},
		{`schema.list(schema.int(), default = [1])`, `[1]`},
		{`schema.dict(schema.int(), default = {"a": 1})`, `{"a": 1}`},
		{`schema.enum("a", "b", default = "b")`, `"b"`},
		{`schema.optional(schema.int())`, `None`},
		{`schema.optional(schema.int(default = 3))`, `3`},
		{`schema.any()`, `required field missing (want any)`},
		{`schema.any(default = None)`, `None`},
		{`schema.object()`, `record()`},
		{`schema.object(a = schema.int(default = 1), b = schema.optional(schema.string()))`, `record(a = 1, b = None)`},
		{`schema.object(a = schema.int(default = 1), b = schema.string())`, `required field missing (want object{a?: int, b: string})`},
	} {
		s := starEval(t, test.schema, nil).(*Schema)
		res, err := s.Validate(nil, "")
		var got string
		if err != nil {
			got = err.Error()
		} else {
			got = res.String()
			if err := checkFrozen(res); err != nil {
				t.Errorf("%s: %v", test.schema, err)
			}
			if d, ok := s.Default(); !ok || d != res {
				t.Errorf("%s.Default() = %v, %v; want %v", test.schema, d, ok, res)
			}
		}
		if got != test.want {
			t.Errorf("%s.Validate(nil) = %s, want %s", test.schema, got, test.want)
		}
	}
}

func TestSchemaConstructorErrors(t *testing.T) {
	for _, test := range []struct {
		expr, want string
	}{
		{`schema.string(default = 1)`, `schema.string: default: want string, got int`},
		{`schema.string(default = "ab", min_len = 3)`, `schema.string: default: want string (length ≥ 3), got "ab" (length 2)`},
		{`schema.string("x")`, `schema.string: got 1 positional arguments, want keyword arguments only`},
		{`schema.string(min_len = -1)`, `schema.string: min_len must be ≥ 0, got -1`},
		{`schema.string(min_len = "1")`, `schema.string: for parameter "min_len": got string, want int`},
		{`schema.string(min_len = 3, max_len = 2)`, `schema.string: min_len 3 > max_len 2`},
		{`schema.string(pattern = "(")`, "schema.string: invalid pattern: error parsing regexp: missing closing ): `(`"},
		{`schema.string(doc = 1)`, `schema.string: for parameter "doc": got int, want string`},
		{`schema.string(bogus = 1)`, `schema.string: unexpected keyword argument "bogus"`},
		{`schema.int(default = 0, min = 1)`, `schema.int: default: want int ≥ 1, got 0`},
		{`schema.int(default = 1.0)`, `schema.int: default: want int, got float`},
		{`schema.int(min = 1.5)`, `schema.int: for parameter "min": got 1.5, want int`},
		{`schema.int(min = True)`, `schema.int: for parameter "min": got True, want int`},
		{`schema.int(min = 5, max = 1)`, `schema.int: min 5 > max 1`},
		{`schema.float(max = float("nan"))`, `schema.float: for parameter "max": got nan, want float`},
		{`schema.float(min = 1.5, max = 1)`, `schema.float: min 1.5 > max 1`},
		{`schema.bool(default = None)`, `schema.bool: default: want bool, got None`},
		{`schema.list()`, `schema.list: missing argument for item_schema`},
		{`schema.list("x")`, `schema.list: for parameter item_schema: got string, want schema`},
		{`schema.list(schema.int(), default = [1, "x", None])`, `schema.list: default[1]: want int, got string; default[2]: want int, got None`},
		{`schema.list(schema.int(), max_len = 1, default = [1, 2])`, `schema.list: default: want list of int (length ≤ 1), got length 2`},
		{`schema.dict(schema.int(), default = {"a": "b"})`, `schema.dict: default.a: want int, got string`},
		{`schema.dict()`, `schema.dict: missing argument for value_schema`},
		{`schema.enum()`, `schema.enum: want at least one value`},
		{`schema.enum("a", 1)`, `schema.enum: value 2: got int, want string`},
		{`schema.enum("a", "a")`, `schema.enum: duplicate value "a"`},
		{`schema.enum("a", default = "b")`, `schema.enum: default: want one of "a", got "b"`},
		{`schema.optional(1)`, `schema.optional: for parameter schema: got int, want schema`},
		{`schema.optional(schema.int(), default = 1)`, `schema.optional: unexpected keyword argument "default"`},
		{`schema.any(default = lambda: 1)`, `schema.any: default: want JSON data, got function`},
		{`schema.object(x = 1)`, `schema.object: field x: got int, want schema`},
		{`schema.object({"x": schema.int()}, x = schema.int())`, `schema.object: duplicate field x`},
		{`schema.object({1: schema.int()})`, `schema.object: got int field name, want string`},
		{`schema.object([])`, `schema.object: got list, want dict of fields`},
		{`schema.object({}, {})`, `schema.object: got 2 positional arguments, want at most 1`},
		{`schema.object(doc = 1)`, `schema.object: for parameter "doc": got int, want string`},
	} {
		_, err := starEvalErr(test.expr, nil)
		if got := errString(err); got != test.want {
			t.Errorf("%s: got error %s, want %s", test.expr, got, test.want)
		}
	}
}

func TestSchemaDoc(t *testing.T) {
	for _, test := range []struct {
		expr, want string
	}{
		{`schema.string(doc = "who to greet")`, "who to greet"},
		{`schema.int()`, ""},
		{`schema.int(doc = None)`, ""},
		{`schema.optional(schema.int(doc = "inner"))`, "inner"},
		{`schema.optional(schema.int(doc = "inner"), doc = "outer")`, "outer"},
		{`schema.optional(schema.optional(schema.int(), doc = "inner"), doc = "outer")`, "outer"},
		{`schema.object(doc = "the inputs", doc2 = schema.int())`, "the inputs"},
		{`schema.object({"doc": schema.int()}, doc = "d")`, "d"},
	} {
		s := starEval(t, test.expr, nil).(*Schema)
		if got := s.Doc(); got != test.want {
			t.Errorf("%s.Doc() = %q, want %q", test.expr, got, test.want)
		}
	}
}

func TestSchemaGoAPI(t *testing.T) {
	s := starEval(t, `schema.object(
    who = schema.string(),
    tags = schema.list(schema.enum("a", "b")),
    labels = schema.dict(schema.int()),
    n = schema.optional(schema.int()),
)`, nil).(*Schema)
	if s.Kind() != KindObject || s.Kind().String() != "object" {
		t.Errorf("Kind = %v", s.Kind())
	}
	var fields []string
	for name, f := range s.Fields() {
		desc := f.Kind().String()
		if e := f.Elem(); e != nil {
			desc += "(" + e.Kind().String() + ")"
		}
		fields = append(fields, name+":"+desc)
	}
	if got, want := strings.Join(fields, " "), "who:string tags:list(enum) labels:dict(int) n:optional(int)"; got != want {
		t.Errorf("fields = %s, want %s", got, want)
	}
	for _, f := range s.Fields() {
		if f.Kind() == KindList {
			if got := strings.Join(f.Elem().Enum(), ","); got != "a,b" {
				t.Errorf("Enum = %s", got)
			}
		}
	}
	if _, ok := s.Default(); ok {
		t.Errorf("object with required fields has a default")
	}
	if got := Kind(99).String(); got != "Kind(99)" {
		t.Errorf("Kind(99) = %s", got)
	}
	if _, err := s.Hash(); err == nil {
		t.Errorf("schema is hashable")
	}
}

func TestSchemaValidateJSON(t *testing.T) {
	s := starEval(t, `schema.object(who = schema.string(), tags = schema.list(schema.string(), default = []))`, nil).(*Schema)
	for _, test := range []struct {
		json, want string
	}{
		{`{"who": "x"}`, `record(who = "x", tags = [])`},
		{`{"tags": ["a", 1], "whom": 1}`, "inputs.who: required field missing (want string)\ninputs.tags[1]: want string, got int\ninputs.whom: unknown field (did you mean \"who\"?)"},
		{`{"who": "x",}`, `inputs: decoding JSON at offset 13: invalid character '}' looking for beginning of object key string`},
	} {
		v, err := s.ValidateJSON([]byte(test.json), "inputs")
		got := errString(err)
		if err == nil {
			got = v.String()
		}
		if got != test.want {
			t.Errorf("ValidateJSON(%s) = %s, want %s", test.json, got, test.want)
		}
	}
}

// TestSchemaFrozen checks from Starlark that validated values are frozen.
func TestSchemaFrozen(t *testing.T) {
	s := starEval(t, `schema.object(
    tags = schema.list(schema.string()),
    labels = schema.dict(schema.list(schema.int())),
    extra = schema.any(),
)`, nil).(*Schema)
	input := starEval(t, `{"tags": ["a"], "labels": {"x": [1]}, "extra": {"l": [1]}}`, nil)
	r, err := s.Validate(input, "inputs")
	if err != nil {
		t.Fatal(err)
	}
	env := starlark.StringDict{"r": r, "input": input}
	for _, test := range []struct {
		src, want string
	}{
		{`r.tags.append("b")`, `append: cannot append to frozen list`},
		{`r.labels.update(y = [])`, `update: cannot insert into frozen hash table`},
		{`r.labels["x"].append(2)`, `append: cannot append to frozen list`},
		{`r.extra["l"].append(2)`, `append: cannot append to frozen list`},
		{`r.extra.clear()`, `cannot clear frozen hash table`},
		// The input is not frozen, and is not shared with the result.
		{`input["tags"].append("b") or input["extra"]["l"].append(2) or (r.tags, r.extra)`, ``},
	} {
		_, err := starEvalErr(test.src, env)
		if got := errString(err); test.want != "" && got != test.want || test.want == "" && err != nil {
			t.Errorf("%s: got error %q, want %q", test.src, got, test.want)
		}
	}
	if got, want := r.String(), `record(tags = ["a"], labels = {"x": [1]}, extra = {"l": [1]})`; got != want {
		t.Errorf("result after changing input = %s, want %s", got, want)
	}
}

// checkFrozen reports an error if v contains a list or dict that is not
// frozen, or a value that JSON cannot encode.
func checkFrozen(v starlark.Value) error {
	switch v := v.(type) {
	case *starlark.List:
		if err := v.Append(starlark.None); err == nil {
			return fmt.Errorf("list %v is not frozen", v)
		}
		for x := range v.Elements() {
			if err := checkFrozen(x); err != nil {
				return err
			}
		}
	case *starlark.Dict:
		if err := v.SetKey(starlark.String("\x00"), starlark.None); err == nil {
			return fmt.Errorf("dict %v is not frozen", v)
		}
		for _, x := range v.Entries() {
			if err := checkFrozen(x); err != nil {
				return err
			}
		}
	case *Record:
		for _, x := range v.All() {
			if err := checkFrozen(x); err != nil {
				return err
			}
		}
	case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String:
	default:
		return fmt.Errorf("unexpected %s in result", v.Type())
	}
	return nil
}

// fuzzSchemaSrc is the schema of FuzzSchemaValidate.
const fuzzSchemaSrc = `schema.object(
    name = schema.string(min_len = 1),
    count = schema.int(min = 1),
    tags = schema.list(schema.enum("a", "b", "c"), default = []),
    extra = schema.optional(schema.dict(schema.any())),
    ratio = schema.float(default = 0.5, max = 1),
    opts = schema.object(
        depth = schema.int(default = 3, min = 0, max = 10),
        flag = schema.bool(default = False),
        label = schema.string(default = "x", max_len = 10, pattern = "^[a-z]*$"),
        nested = schema.object(
            items = schema.list(schema.optional(schema.int()), default = [None]),
        ),
    ),
)`

func FuzzSchemaValidate(f *testing.F) {
	s := starEval(f, fuzzSchemaSrc, nil).(*Schema)
	f.Add([]byte(`{"name": "x", "count": 1}`))
	f.Add([]byte(`{"name": "", "count": 0, "tags": ["d"], "opts": {"depth": 11}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data)
		if err != nil {
			return
		}
		res, err := s.Validate(v, "inputs")
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 {
				t.Fatalf("Validate(%q): error %v is not a *ValidationError with problems", data, err)
			}
			for _, p := range verr.Problems {
				if p.Path != "inputs" && !strings.HasPrefix(p.Path, "inputs.") && !strings.HasPrefix(p.Path, "inputs[") || p.Msg == "" {
					t.Fatalf("Validate(%q): bad problem %q", data, p)
				}
			}
			if got := len(strings.Split(err.Error(), "\n")); got < len(verr.Problems) {
				t.Fatalf("Validate(%q): %d lines for %d problems", data, got, len(verr.Problems))
			}
			return
		}
		if res.Type() != "record" {
			t.Fatalf("Validate(%q) = %s, want record", data, res.Type())
		}
		if err := checkFrozen(res); err != nil {
			t.Fatalf("Validate(%q): %v", data, err)
		}
		out, err := ToJSON(res)
		if err != nil {
			t.Fatalf("ToJSON(Validate(%q)): %v", data, err)
		}
		res2, err := s.ValidateJSON(out, "inputs")
		if err != nil {
			t.Fatalf("ValidateJSON(ToJSON(Validate(%q))) = ValidateJSON(%q): %v", data, out, err)
		}
		if eq, err := deepEqual(res, res2); err != nil || !eq {
			t.Fatalf("validation of %q is not idempotent: %v != %v (%v)", data, res, res2, err)
		}
		if out2, err := ToJSON(res2); err != nil || string(out2) != string(out) {
			t.Fatalf("validation of %q is not idempotent: %s != %s (%v)", data, out, out2, err)
		}
	})
}

// TestSchemaRecordNames checks that validated records name their path in
// attribute errors.
func TestSchemaRecordNames(t *testing.T) {
	s := starEval(t, `schema.object(
    who = schema.string(),
    repo = schema.object(branch = schema.string(default = "main")),
    hosts = schema.list(schema.object(name = schema.string())),
)`, nil).(*Schema)
	r, err := s.Validate(starEval(t, `{"who": "x", "hosts": [{"name": "h"}]}`, nil), "inputs")
	if err != nil {
		t.Fatal(err)
	}
	env := starlark.StringDict{"r": r}
	for _, test := range []struct {
		src, want string
	}{
		{`r.whoo`, `inputs has no field "whoo" (did you mean "who"?)`},
		{`r.repo.brnch`, `inputs.repo has no field "brnch" (did you mean "branch"?)`},
		{`r.hosts[0].nme`, `inputs.hosts[0] has no field "nme" (did you mean "name"?)`},
		{`r.repo.branch + r.hosts[0].name + r.who`, ``},
	} {
		_, err := starEvalErr(test.src, env)
		if got := errString(err); test.want != "" && got != test.want || test.want == "" && err != nil {
			t.Errorf("%s: got error %q, want %q", test.src, got, test.want)
		}
	}
	r2, err := s.Validate(starEval(t, `{"who": "x", "hosts": []}`, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := starEvalErr(`r.zz`, starlark.StringDict{"r": r2}); errString(err) != `record has no field "zz"` {
		t.Errorf("r.zz: got error %q", errString(err))
	}
}

func TestSchemaDefaultRecordNames(t *testing.T) {
	s := starEval(t, `schema.object(hosts = schema.list(schema.object(name = schema.string()), default = [{"name": "h"}]))`, nil).(*Schema)
	r, err := s.Validate(starEval(t, `{}`, nil), "inputs")
	if err != nil {
		t.Fatal(err)
	}
	_, err = starEvalErr(`r.hosts[0].nme`, starlark.StringDict{"r": r})
	if got, want := errString(err), `record has no field "nme" (did you mean "name"?)`; got != want {
		t.Errorf("got error %q, want %q", got, want)
	}
}
