package interp

import (
	"testing"

	"go.starlark.net/starlark"
)

// TestObjectsEncodeValidateAndPatchAsDicts: the objects of a message are
// JSON objects wherever a dict is: encoding, patching only what changed, and
// schemas.
func TestObjectsEncodeValidateAndPatchAsDicts(t *testing.T) {
	orig := []byte(`{"sessionId":"s", "n": 1.50, "update":{"content":{"type":"text","text":"hunter2"}}}`)
	v, err := DecodeObjects(orig, "message.params")
	if err != nil {
		t.Fatal(err)
	}
	if out, changed, err := PatchJSON(orig, v, "params"); err != nil || changed || string(out) != string(orig) {
		t.Fatalf("unchanged object: %s %v %v", out, changed, err)
	}
	content := starEval(t, `p.update.content`, starlark.StringDict{"p": v})
	if err := content.(*Object).SetField("text", starlark.String("[redacted]")); err != nil {
		t.Fatal(err)
	}
	out, changed, err := PatchJSON(orig, v, "params")
	if want := `{"sessionId":"s","n":1.50,"update":{"content":{"type":"text","text":"[redacted]"}}}`; err != nil || !changed || string(out) != want {
		t.Fatalf("patched: got %s, want %s (%v)", out, want, err)
	}
	if out, err := ToJSON(v); err != nil || string(out) != `{"sessionId":"s","n":1.5,"update":{"content":{"type":"text","text":"[redacted]"}}}` {
		t.Errorf("ToJSON: %s %v", out, err)
	}

	s := starEval(t, `schema.object(sessionId = schema.string(), update = schema.any(), n = schema.float())`, nil).(*Schema)
	valid, err := s.Validate(v, "state")
	if err != nil {
		t.Fatal(err)
	}
	if got := valid.String(); got != `record(sessionId = "s", update = {"content": {"type": "text", "text": "[redacted]"}}, n = 1.5)` {
		t.Errorf("validated: %s", got)
	}
	if _, err := starEval(t, `schema.dict(schema.string())`, nil).(*Schema).Validate(v, "d"); err == nil || err.Error() != "d.n: want string, got float\nd.update: want string, got object" {
		t.Errorf("dict of strings: %v", err)
	}
}
