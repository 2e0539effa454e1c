package builtins

import "github.com/blaiseagent/blaise-agent/hosts/hostd"

// TypeAttrs returns the attribute names of the values handlers receive, by
// the type name Starlark gives them, for editors: the language server
// completes and checks them from here, so that a new attribute needs no
// second list.
func TypeAttrs() map[string][]string {
	return map[string][]string{
		"ctx":          ctxAttrs,
		"message":      messageAttrs,
		"host":         (&Host{h: (*hostd.Client)(nil)}).AttrNames(), // with forward, which some hosts have
		"fs":           fsMethodNames,
		"process":      processAttrNames,
		"PauseInfo":    (&PauseInfo{}).AttrNames(),
		"TeardownInfo": (&PauseInfo{Teardown: true}).AttrNames(),
		"persisted":    (&persistedView{}).AttrNames(),
		"log":          (&Log{}).AttrNames(),
		"signal":       (&Signal{}).AttrNames(),
		"agent":        agentAttrs,
	}
}
