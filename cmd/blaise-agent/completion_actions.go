package main

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/charmbracelet/log"
	"github.com/posener/complete"
)

// completionTimeout bounds the wait for a server's answer: a server that
// does not answer completes nothing, and the shell is not held.
const completionTimeout = 2 * time.Second

// predictActions lists the actions of the session named on the command
// line of sessions do (whose words a.Completed holds, flags and the id):
// with --server (or $BLAISE_SERVER), those the server lists for it; else
// what the plugs of its configuration offer.
func predictActions(a complete.Args) []string {
	srv := ServerFlags{Server: os.Getenv("BLAISE_SERVER"), Token: os.Getenv("BLAISE_TOKEN")}
	id := ""
	for i := 0; i < len(a.Completed); i++ {
		w := a.Completed[i]
		name, value, inline := strings.Cut(w, "=")
		switch {
		case name == "--server" || name == "--token" || name == "--state-dir":
			if !inline && i+1 < len(a.Completed) {
				i++
				value = a.Completed[i]
			}
			switch name {
			case "--server":
				srv.Server = value
			case "--token":
				srv.Token = value
			}
		case id == "" && !strings.HasPrefix(w, "-"):
			id = w
		}
	}
	if id == "" {
		return nil
	}
	if srv.Server != "" {
		return serverActions(srv, id)
	}
	st := completionStore(a)
	if st == nil {
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

// serverActions are the names of the actions the server lists for the
// session id; none when it does not answer within completionTimeout.
func serverActions(srv ServerFlags, id string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := srv.client().Actions(ctx, id)
	if err != nil {
		return nil
	}
	names := make([]string, len(list))
	for i, a := range list {
		names[i] = a.Name
	}
	return names
}
