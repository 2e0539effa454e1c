package pluglock_test

import (
	"encoding/pem"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// serveGit serves the repositories under root over HTTPS on loopback with
// git's own http-backend, and makes git trust the server.
func serveGit(t *testing.T, root string) *httptest.Server {
	t.Helper()
	backend := filepath.Join(testsupport.Git(t, "", "--exec-path"), "git-http-backend")
	srv := httptest.NewTLSServer(&cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, cert, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_SSL_CAINFO", ca)
	return srv
}

// TestHTTPSRepositoryResolvesLocksAndRuns: a git+https reference
// to a real server: lock, a run from the cache, and an unreachable server
// once the cache must fetch again.
func TestHTTPSRepositoryResolvesLocksAndRuns(t *testing.T) {
	f := newFixture(t, "v1")
	srv := serveGit(t, filepath.Dir(f.repo))
	ref := "git+" + srv.URL + "/plugs//team/greeter.star@v1"
	f.writeConfig(t, ref)
	f.lock(t, pluglock.Lock)
	head := testsupport.Git(t, f.repo, "rev-parse", "HEAD")
	if e := f.readLock(t).Plugs[ref]; e.Commit != head {
		t.Fatalf("lock of %s = %+v, want commit %s", ref, e, head)
	}
	srv.Close()
	cfg, _, err := f.load(pluglock.Locked)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cfg.Uses[0].Key, "@"+head) {
		t.Fatalf("key = %s", cfg.Uses[0].Key)
	}
	t.Setenv(gitcache.EnvDir, t.TempDir())
	_, _, err = f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:3:8", ref, "cannot fetch "+srv.URL+"/plugs (unreachable?)")
}
