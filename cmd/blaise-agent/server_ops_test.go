package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/session"
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
	c, sid := l.open()
	if _, resp := c.Turn(2, sid, "hello"); resp.Error != nil {
		t.Fatalf("turn: %s", resp.Raw)
	}
	c.in.Close()
	_ = c.cmd.Wait()
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == session.Paused })

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
	if rec := l.session(id); rec.State != session.Paused || rec.Runs != 1 {
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
