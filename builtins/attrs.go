package builtins

import (
	"fmt"

	"go.starlark.net/starlark"
)

// noSuchAttr reports an unknown attribute; Starlark adds the "did you
// mean" hint from AttrNames.
func noSuchAttr(typ, name string, _ []string) error {
	return starlark.NoSuchAttrError(fmt.Sprintf("%s has no attribute %q", typ, name))
}
