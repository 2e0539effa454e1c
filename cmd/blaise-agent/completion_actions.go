package main

import (
	"context"
	"io"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/charmbracelet/log"
	"github.com/posener/complete"
)

// predictActions lists the actions of the session named on the command
// line of sessions do (whose words a.Completed holds, flags and the id):
// what the plugs of its configuration offer.
func predictActions(a complete.Args) []string {
	id := ""
	for i, w := range a.Completed {
		if !strings.HasPrefix(w, "-") && (i == 0 || a.Completed[i-1] != "--state-dir") {
			id = w
			break
		}
	}
	st := completionStore(a)
	if id == "" || st == nil {
		return nil
	}
	rec, err := st.Session(context.Background(), id)
	if err != nil {
		return nil
	}
	cfg, err := chain.LoadConfig(rec.Config, log.New(io.Discard))
	if err != nil {
		return nil
	}
	return cfg.ActionNames()
}
