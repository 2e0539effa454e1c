package builtins

import "go.starlark.net/starlark"

// Predeclared are the names the runtime adds to plug files and modules.
var Predeclared = starlark.StringDict{}
