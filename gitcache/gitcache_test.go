package gitcache_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blaiseagent/blaise-agent/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/testsupport"
)

// envFetch makes the test binary a process that fetches one URL into the
// cache and exits.
const envFetch = "GITCACHE_TEST_FETCH"

func TestMain(m *testing.M) {
	if url := os.Getenv(envFetch); url != "" {
		c, err := gitcache.Open()
		if err == nil {
			err = c.Fetch(url)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestIssue18_TwoProcessesFillTheCacheAtOnce: processes that fetch the
// same repository into an empty cache at once all succeed, and the cache
// then holds the commit (issue 18, item 3).
func TestIssue18_TwoProcessesFillTheCacheAtOnce(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "plugs")
	commit := testsupport.GitCommit(t, repo, map[string]string{"x.star": "X = 1\n"})
	url := "file://" + repo
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envFetch+"="+url, gitcache.EnvDir+"="+dir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a fetching process failed: %v", err)
		}
	}
	c := &gitcache.Cache{Dir: dir, Offline: true}
	data, err := c.ReadFile(url, commit, "x.star", 100)
	if err != nil || string(data) != "X = 1\n" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
}
