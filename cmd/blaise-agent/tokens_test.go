package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestTokensRevokeCutsTheRunnersConnection: `tokens revoke` writes the
// server's store, not to the server; the running server finds the revocation
// and cuts the runner's connection, as the dashboard's Revoke does: the
// runner is refused when it reconnects, and exits.
func TestTokensRevokeCutsTheRunnersConnection(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	r := l.runner("r1", "blaise.star")
	list := l.cli(append([]string{"tokens", "list"}, l.storeFlags()...)...)
	m := regexp.MustCompile(`(?m)^runner\s+(\S+)\s+r1\s`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("tokens list has no runner r1:\n%s", list)
	}
	l.cli(append([]string{"tokens", "revoke", m[1]}, l.storeFlags()...)...)
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	var err error
	testsupport.Eventually(t, "runner r1 exits", func() bool {
		select {
		case err = <-exited:
			return true
		default:
			return false
		}
	})
	if err == nil || !strings.Contains(r.logs.String(), "refused") {
		t.Fatalf("runner r1 after tokens revoke: %v\n%s", err, r.logs)
	}
	if !strings.Contains(l.logs.String(), "cutting the connection of a revoked runner") {
		t.Fatalf("the server does not say it cut r1:\n%s", l.logs)
	}
}
