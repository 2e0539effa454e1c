package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// `serve backup` while the server serves; the archive extracted into a
// fresh data directory with the store key (docs/server.md#backups) is a
// server with the same sessions, whose persisted state decrypts: the
// session resumes there with its count.
func TestServeBackupRestoresIntoAFreshDataDirectory(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 5*time.Second, "--idle-policy", "pause")
	l.writeCounter()
	r := l.runner("r1", "blaise.star")
	c, sid := l.openAfter("hello")
	c.in.Close()
	_ = c.cmd.Wait()
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })

	archive := filepath.Join(l.dir, "backup.tar")
	if out := l.cli(append([]string{"serve", "backup", archive}, l.storeFlags()...)...); !strings.Contains(out, "backed up") {
		t.Fatalf("serve backup: %s", out)
	}
	fresh := filepath.Join(l.dir, "restored")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", fresh).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	key, err := os.ReadFile(filepath.Join(l.data, "store.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "store.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}

	// The old server and its runner go; the restored one serves.
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	l.data = fresh
	l.startServer("127.0.0.1:0")
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("restored session: %s with %d runs, want paused after 1", rec.State, rec.Runs)
	}
	r = l.runner("r1", "blaise.star") // its credential is in the backup
	c = l.client()
	c.Initialize(`{}`)
	c.LoadSession(3, sid, l.dir)
	c.Until(acptest.ResponseTo("3"))
	if !strings.Contains(r.logs.String(), "counted run=2 kind=resume") {
		t.Fatalf("the restored session did not resume with its state:\n%s", r.logs)
	}
}

// heldConns is how many idle connections TestIdleConnectionsHoldNothing
// opens: $BLAISE_HELD_CONNS, for the full figure of docs/server.md
// (20,000, with `ulimit -n` above twice that), else a realistic few.
func heldConns(t *testing.T) int {
	if v := os.Getenv("BLAISE_HELD_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("BLAISE_HELD_CONNS=%q: want a number", v)
		}
		return n
	}
	return 600
}

// Idle connections from many addresses, as an attacker holds them, hold
// no more than their caps: a health check still answers, and a runner
// connects. The health checks' latencies are logged (docs/server.md#limits).
func TestIdleConnectionsHoldNothing(t *testing.T) {
	t.Parallel()
	n := heldConns(t)
	const perAddr = 200
	l := newServerLabWith(t, []string{"--max-conns-per-addr", strconv.Itoa(perAddr)}, "", 5*time.Second)
	addr := strings.TrimPrefix(l.url, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range n {
		// From 127.0.1.X: loopback, not the health check's 127.0.0.1.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i/perAddr))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
	}
	var took []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := http.Get(l.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("health check: %s", resp.Status)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("%d idle connections held: health check p50 %v, max %v", n, took[len(took)/2], took[len(took)-1])
	l.runner("r1", "blaise.star")
}
