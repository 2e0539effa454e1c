package interp_test

import (
	"testing"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// TestM4_PatchReencodesOnlyWhatChanged changes one member deep inside a
// message; every other byte, spacing and number format included, stays.
func TestM4_PatchReencodesOnlyWhatChanged(t *testing.T) {
	orig := []byte(`{"sessionId":"s", "n": 1.50, "e":"\u003c", "update":{"content":{"type":"text","text":"hunter2"},"_meta":{"k":[1, 2]}}}`)
	v, err := interp.FromJSON(orig)
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := interp.PatchJSON(orig, v, "params")
	if err != nil || changed || string(out) != string(orig) {
		t.Fatalf("unchanged value: %s %v %v", out, changed, err)
	}
	content, _, _ := v.(*starlark.Dict).Get(starlark.String("update"))
	inner, _, _ := content.(*starlark.Dict).Get(starlark.String("content"))
	_ = inner.(*starlark.Dict).SetKey(starlark.String("text"), starlark.String("[redacted]"))
	out, changed, err = interp.PatchJSON(orig, v, "params")
	want := `{"sessionId":"s","n":1.50,"e":"\u003c","update":{"content":{"type":"text","text":"[redacted]"},"_meta":{"k":[1, 2]}}}`
	if err != nil || !changed || string(out) != want {
		t.Fatalf("got  %s\nwant %s (%v)", out, want, err)
	}
}
