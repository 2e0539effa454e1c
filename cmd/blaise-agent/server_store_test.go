package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// sessionProcessArgs are the arguments of the session process of the
// runner r (it has one live run).
func sessionProcessArgs(t *testing.T, r *labRunner) []string {
	t.Helper()
	for _, pid := range descendants(r.cmd.Process.Pid)[1:] {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if len(args) > 1 && args[1] == "session-process" {
			return args
		}
	}
	t.Fatalf("runner %s has no session process", r.name)
	return nil
}

// TestARunsStoreIsOnAConnectionOfItsOwnOverTLS: the session process of a
// runner's run reaches the server for its store itself, over TLS,
// trusting the server's certificate as the runner does (SSL_CERT_FILE),
// and shown its ticket on a pipe, not on its command line. The turn's
// answer came through it: a runner's run carries its messages toward the
// client in its transcript's records (--carry).
func TestARunsStoreIsOnAConnectionOfItsOwnOverTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, cert, key)
	t.Setenv("SSL_CERT_FILE", cert) // of the lab's every process
	l := newServerLabWith(t, []string{"--tls-cert", cert, "--tls-key", key}, "", time.Minute)
	if !strings.HasPrefix(l.url, "https://") {
		t.Fatalf("url %s, want https", l.url)
	}
	r := l.runner("r1", "blaise.star")
	c, _ := l.openAfter("hello over TLS")
	args := strings.Join(sessionProcessArgs(t, r), " ")
	if !strings.Contains(args, "--store-server "+l.url) {
		t.Fatalf("the session process's arguments %q: want --store-server %s", args, l.url)
	}
	if !strings.Contains(args, "--store-fd 4") {
		t.Fatalf("the session process's arguments %q: want its ticket on --store-fd 4", args)
	}
	if strings.Contains(r.logs.String(), "cannot be reached") {
		t.Fatalf("the runner did not reach the store connections:\n%s", r.logs)
	}
	c.close()
	l.drain(r)
}

// TestARunnerBehindAProxyThatPassesOnlyWebSocketsCarriesItsRunsStores: a
// runner whose way to the server refuses the store connections' upgrade
// says so, speaks runner protocol 6 and carries its runs' stores over its
// own connection: its sessions work as before.
func TestARunnerBehindAProxyThatPassesOnlyWebSocketsCarriesItsRunsStores(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	target, err := url.Parse(l.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up := r.Header.Get("Upgrade"); up != "" && !strings.EqualFold(up, "websocket") {
			http.Error(w, "this proxy passes WebSocket upgrades only", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	r := l.startRunnerVia("r1", "blaise.star", proxy.URL)
	testsupport.Eventually(t, "runner r1 connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	if logs := r.logs.String(); !strings.Contains(logs, "the server's store connections cannot be reached") || !strings.Contains(logs, "502") {
		t.Fatalf("the runner's log does not say why it carries the stores:\n%s", logs)
	}
	c, sid := l.openAfter("hello through a proxy")
	if args := strings.Join(sessionProcessArgs(t, r), " "); strings.Contains(args, "--store-server") {
		t.Fatalf("the session process's arguments %q: want its store through the runner", args)
	}
	testsupport.Eventually(t, "the turn's records are stored", func() bool {
		raw, _ := json.Marshal(l.transcriptRecords(sid))
		return strings.Contains(string(raw), "hello through a proxy")
	})
	c.close()
	l.drain(r)
}
