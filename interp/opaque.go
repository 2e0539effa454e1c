package interp

import (
	"fmt"

	"go.starlark.net/starlark"
)

// Inert is embedded by a Starlark value that is always true and has no
// state Starlark can change: its Freeze does nothing.
type Inert struct{}

func (Inert) Freeze()              {}
func (Inert) Truth() starlark.Bool { return true }

// typed is a value's pointer type; its Type answers for a nil pointer too.
type typed interface{ Type() string }

// Opaque is embedded by a value of type T (a pointer) that is a handle,
// not data: Inert, and not hashable ("unhashable: " and its type).
type Opaque[T typed] struct{ Inert }

func (Opaque[T]) Hash() (uint32, error) {
	var v T
	return 0, fmt.Errorf("unhashable: %s", v.Type())
}

// Unhashable is embedded by a value of type T (a pointer) that cannot be a
// dict key or in a set; its error has Starlark's words for a list's
// ("unhashable type: " and its type).
type Unhashable[T typed] struct{}

func (Unhashable[T]) Hash() (uint32, error) {
	var v T
	return 0, fmt.Errorf("unhashable type: %s", v.Type())
}
