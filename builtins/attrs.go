package builtins

import (
	"fmt"

	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// noSuchAttr reports an unknown attribute with a suggestion.
func noSuchAttr(typ, name string, names []string) error {
	if near := interp.Nearest(name, names); near != "" {
		return starlark.NoSuchAttrError(fmt.Sprintf("%s has no attribute %q (did you mean %q?)", typ, name, near))
	}
	return starlark.NoSuchAttrError(fmt.Sprintf("%s has no attribute %q", typ, name))
}
