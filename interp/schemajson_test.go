package interp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestASchemaMadeAgainFromItsJSONIsTheSame: every kind of schema, with its
// options, docs and defaults, encoded as JSON and made again, describes,
// documents and validates as it did, and encodes the same.
func TestASchemaMadeAgainFromItsJSONIsTheSame(t *testing.T) {
	s := starEval(t, `schema.object(
    {"doc": schema.string(default = "d")},
    doc = "An action.",
    who = schema.string(min_len = 1, max_len = 8, pattern = "^[a-z]+$", doc = "Who."),
    n = schema.int(min = 1, max = 10, default = 3),
    x = schema.float(min = 0, max = 2.5),
    on = schema.bool(default = False, doc = "On."),
    tags = schema.list(schema.enum("a", "b"), min_len = 1, default = ["a"]),
    labels = schema.dict(schema.int(), default = {"k": 1}),
    maybe = schema.optional(schema.string(default = "m"), doc = "Maybe."),
    none = schema.optional(schema.int()),
    data = schema.any(default = None),
    inner = schema.object(a = schema.int(default = 1)),
    items = schema.list(schema.object(b = schema.string())),
)`, nil).(*Schema)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSchemaJSON(data)
	if err != nil {
		t.Fatalf("ParseSchemaJSON(%s): %v", data, err)
	}
	if got.Describe() != s.Describe() || got.Doc() != s.Doc() {
		t.Errorf("made again: %s (%q), want %s (%q)", got.Describe(), got.Doc(), s.Describe(), s.Doc())
	}
	again, err := json.Marshal(got)
	if err != nil || string(again) != string(data) {
		t.Errorf("encoded again: %s %v, want %s", again, err, data)
	}
	for _, in := range []string{
		`{"who": "ab", "x": 1, "items": []}`,
		`{"who": "AB", "n": 11, "x": 3, "tags": [], "labels": {"k": "1"}, "maybe": 1, "items": [{}], "nope": 1}`,
	} {
		want, wantErr := s.ValidateJSON([]byte(in), "args")
		v, err := got.ValidateJSON([]byte(in), "args")
		if errString(err) != errString(wantErr) || (err == nil && v.String() != want.String()) {
			t.Errorf("validating %s: %v %v, want %v %v", in, v, err, want, wantErr)
		}
	}
}

// TestASchemaFromBadJSONIsRefusedAsTheSchemaModuleRefusesIt: a kind that is
// none, a default its schema refuses and bounds the wrong way round are
// refused, each saying why.
func TestASchemaFromBadJSONIsRefusedAsTheSchemaModuleRefusesIt(t *testing.T) {
	for _, c := range []struct{ json, says string }{
		{`{"kind": "nope"}`, `unknown schema kind "nope"`},
		{`{"kind": "int", "default": "x"}`, "default: want int, got string"},
		{`{"kind": "string", "min_len": 3, "max_len": 1}`, "min_len 3 > max_len 1"},
		{`{"kind": "object", "fields": [{"name": "a"}]}`, `field "a" has no schema`},
		{`[]`, "cannot unmarshal"},
	} {
		if _, err := ParseSchemaJSON([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseSchemaJSON(%s) = %v, want an error saying %q", c.json, err, c.says)
		}
	}
}

// TestAnActionsArgumentsAreReadAsACommandLineGivesThem: strings are read
// by their field's kind; what does not read is named with its path under
// args and what was wanted.
func TestAnActionsArgumentsAreReadAsACommandLineGivesThem(t *testing.T) {
	s := starEval(t, `schema.object(stat = schema.bool(default = False), n = schema.optional(schema.int()), who = schema.string(default = ""))`, nil).(*Schema)
	for _, c := range []struct{ in, want string }{
		{``, `record(stat = False, n = None, who = "")`},
		{`{"stat": "true", "n": "3", "who": "7"}`, `record(stat = True, n = 3, who = "7")`},
		{`{"stat": "maybe"}`, "args.stat: want bool, got string"},
		{`{"sat": true}`, `args.sat: unknown field (did you mean "stat"?)`},
		{`["--stat"]`, "its arguments are not a JSON object"},
	} {
		v, err := s.ValidateArgsJSON([]byte(c.in))
		got := errString(err)
		if err == nil {
			got = v.String()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("ValidateArgsJSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
