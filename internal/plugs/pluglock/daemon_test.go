package pluglock_test

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// serveGitDaemon serves the repositories under root with git daemon on a
// loopback port, one daemon per connection (its inetd mode), and returns
// the git:// URL of root.
func serveGitDaemon(t *testing.T, root string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f, err := conn.(*net.TCPConn).File()
			conn.Close()
			if err != nil {
				continue
			}
			cmd := exec.Command("git", "daemon", "--inetd", "--export-all", "--base-path="+root, root)
			cmd.Stdin, cmd.Stdout = f, f
			if cmd.Start() == nil {
				go cmd.Wait()
			}
			f.Close()
		}
	}()
	return "git://" + ln.Addr().String()
}

// TestGitDaemonRepositoryResolvesAndLocks: a git:// reference to
// git daemon on loopback is fetched, pinned and loaded.
func TestGitDaemonRepositoryResolvesAndLocks(t *testing.T) {
	f := newFixture(t, "v1")
	ref := "git+" + serveGitDaemon(t, filepath.Dir(f.repo)) + "/plugs//team/greeter.star@v1"
	f.writeConfig(t, ref)
	f.lock(t, pluglock.Lock)
	head := testsupport.Git(t, f.repo, "rev-parse", "HEAD")
	if e := f.readLock(t).Plugs[ref]; e.Commit != head {
		t.Fatalf("lock of %s = %+v, want commit %s", ref, e, head)
	}
	if _, _, err := f.load(pluglock.Locked); err != nil {
		t.Fatal(err)
	}
}
