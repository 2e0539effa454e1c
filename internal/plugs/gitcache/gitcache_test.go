package gitcache_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"go.uber.org/goleak"
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
	goleak.VerifyTestMain(m)
}

// TestTwoProcessesFillTheCacheAtOnce: processes that fetch the same
// repository into an empty cache at once all succeed, and the cache then
// holds the commit.
func TestTwoProcessesFillTheCacheAtOnce(t *testing.T) {
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

// TestReadFileRefusesAnObjectThatDoesNotHashToItsID: a blob or a tree of
// the cache changed on disk is found and named with the cache's path,
// never read as the repository's content.
func TestReadFileRefusesAnObjectThatDoesNotHashToItsID(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "plugs")
	commit := testsupport.GitCommit(t, repo, map[string]string{"team/x.star": "X = 1\n"})
	url := "file://" + repo
	for _, object := range []struct{ rev, typ, content string }{
		{commit + ":team/x.star", "blob", "X = 2\n"},
		{commit + ":team", "tree", ""},
	} {
		c := &gitcache.Cache{Dir: t.TempDir()}
		if err := c.Fetch(url); err != nil {
			t.Fatal(err)
		}
		if data, err := c.ReadFile(url, commit, "team/x.star", 100); err != nil || string(data) != "X = 1\n" {
			t.Fatalf("ReadFile = %q, %v", data, err)
		}
		id := testsupport.Git(t, repo, "rev-parse", object.rev)
		testsupport.TamperObject(t, c.Path(url), id, object.typ, object.content)
		data, err := c.ReadFile(url, commit, "team/x.star", 100)
		var damaged *gitcache.DamagedError
		if !errors.As(err, &damaged) || damaged.Object != id {
			t.Fatalf("%s changed: ReadFile = %q, %v; want the object named as damaged", object.typ, data, err)
		}
		testsupport.WantErr(t, err, "the cache of "+url+" in "+c.Path(url)+" is damaged", "blaise-agent plugs clean")
	}
}

// TestReadFileChecksPathAndSize: a path missing, a directory, a link and
// a file above the limit are refused with what is wrong.
func TestReadFileChecksPathAndSize(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "plugs")
	commit := testsupport.GitCommit(t, repo, map[string]string{"team/x.star": "X = 1\n"})
	if err := os.Symlink("x.star", filepath.Join(repo, "team/link.star")); err != nil {
		t.Fatal(err)
	}
	commit = testsupport.GitCommit(t, repo, nil)
	url := "file://" + repo
	c := &gitcache.Cache{Dir: t.TempDir()}
	if err := c.Fetch(url); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"team/nope.star": "path team/nope.star not in the repository",
		"team/x.star/y":  "path team/x.star/y not in the repository",
		"team":           "team in " + url + " at commit " + commit + " is not a regular file",
		"team/link.star": "is not a regular file",
	} {
		_, err := c.ReadFile(url, commit, path, 100)
		testsupport.WantErr(t, err, want)
	}
	_, err := c.ReadFile(url, commit, "team/x.star", 3)
	testsupport.WantErr(t, err, "larger than the limit of 3 bytes")
}

// TestFetchCommitBringsACommitNoRefNames: a commit that only a tag named,
// once the tag moved, is fetched by its id and kept.
func TestFetchCommitBringsACommitNoRefNames(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "plugs")
	testsupport.GitCommit(t, repo, map[string]string{"x.star": "X = 1\n"})
	testsupport.Git(t, repo, "checkout", "--quiet", "-b", "side")
	old := testsupport.GitCommit(t, repo, map[string]string{"x.star": "X = 2\n"})
	testsupport.Git(t, repo, "tag", "v1")
	testsupport.Git(t, repo, "checkout", "--quiet", "main")
	testsupport.Git(t, repo, "branch", "--quiet", "-D", "side")
	testsupport.Git(t, repo, "tag", "-f", "v1", "main")
	url := "file://" + repo
	c := &gitcache.Cache{Dir: t.TempDir()}
	if err := c.Fetch(url); err != nil {
		t.Fatal(err)
	}
	if c.Has(url, old) {
		t.Fatal("the cache has the commit no ref names after a fetch of the refs")
	}
	if err := c.FetchCommit(url, old); err != nil || !c.Has(url, old) {
		t.Fatalf("FetchCommit: %v", err)
	}
	if err := c.Fetch(url); err != nil || !c.Has(url, old) {
		t.Fatalf("a later fetch lost the commit: %v", err)
	}
	if err := c.FetchCommit(url, "--upload-pack=x"); err == nil {
		t.Fatal("FetchCommit took an option for a commit")
	}
}

// TestCleanEmptiesTheCacheAndRemoveOneClone: Remove drops the clone of
// one URL, Clean every clone.
func TestCleanEmptiesTheCacheAndRemoveOneClone(t *testing.T) {
	var urls []string
	for _, name := range []string{"a", "b"} {
		repo := filepath.Join(t.TempDir(), name)
		testsupport.GitCommit(t, repo, map[string]string{"x.star": "X = 1\n"})
		urls = append(urls, "file://"+repo)
	}
	c := &gitcache.Cache{Dir: t.TempDir()}
	for _, url := range urls {
		if err := c.Fetch(url); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Remove(urls[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Path(urls[0])); err == nil {
		t.Fatal("Remove left the clone")
	}
	if _, err := os.Stat(c.Path(urls[1])); err != nil {
		t.Fatalf("Remove took another clone: %v", err)
	}
	if err := c.Clean(); err != nil {
		t.Fatal(err)
	}
	if clones, _ := filepath.Glob(filepath.Join(c.Dir, "*.git")); len(clones) != 0 {
		t.Fatalf("Clean left %v", clones)
	}
}
