package builtins

import (
	"github.com/blaiseagent/blaise-agent/hosts"
	startime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
)

// Predeclared are the names the runtime adds to plug files and modules.
var Predeclared = starlark.StringDict{
	"request_error": requestError,
	"hosts":         hostsModule,
	"path":          pathModule,
	"re":            reModule,
	"redact":        redactModule,
	"time":          startime.Module,
}

// HostOf returns the host behind a host value.
func HostOf(v starlark.Value) (hosts.Host, bool) {
	h, ok := v.(*Host)
	if !ok {
		return nil, false
	}
	return h.Unwrap(), true
}
