package main

import (
	"io"
	"slices"

	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/charmbracelet/log"
	"github.com/posener/complete"
)

// predictActions lists the actions of the session named after "do" on the
// command line: what the plugs of its configuration offer.
func predictActions(a complete.Args) []string {
	i := slices.Index(a.Completed, "do")
	if i < 0 || i+1 >= len(a.Completed) {
		return nil
	}
	st := completionStore(a)
	if st == nil {
		return nil
	}
	rec, err := st.Session(a.Completed[i+1])
	if err != nil {
		return nil
	}
	cfg, err := runner.LoadConfig(rec.Config, log.New(io.Discard))
	if err != nil {
		return nil
	}
	return cfg.ActionNames()
}
