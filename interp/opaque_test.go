package interp

import (
	"testing"

	"go.starlark.net/starlark"
)

type opaqueProbe struct{ Opaque[*opaqueProbe] }

func (*opaqueProbe) String() string { return "<probe>" }
func (*opaqueProbe) Type() string   { return "probe" }

type unhashableProbe struct {
	Inert
	Unhashable[*unhashableProbe]
}

func (*unhashableProbe) String() string { return "<probe>" }
func (*unhashableProbe) Type() string   { return "probe" }

// TestSharedValueMethodsNameTheValuesType: a value embedding Opaque or
// Inert and Unhashable is true, frozen without change, and refused as a
// dict key with its own type's name.
func TestSharedValueMethodsNameTheValuesType(t *testing.T) {
	for _, test := range []struct {
		v    starlark.Value
		want string
	}{
		{&opaqueProbe{}, "unhashable: probe"},
		{&unhashableProbe{}, "unhashable type: probe"},
	} {
		test.v.Freeze()
		if !test.v.Truth() {
			t.Errorf("%T is false", test.v)
		}
		_, err := starEvalErr(`{v: 1}`, starlark.StringDict{"v": test.v})
		if got := errString(err); got != test.want {
			t.Errorf("%T as a dict key: %q, want %q", test.v, got, test.want)
		}
	}
}
