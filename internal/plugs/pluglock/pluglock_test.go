package pluglock_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/blaiseagent/blaise-agent/interp"
)

// fixture is a repository of plugs and a configuration that uses one.
type fixture struct {
	repo, dir, ref string
}

func newFixture(t *testing.T, rev string) fixture {
	t.Setenv(gitcache.EnvDir, t.TempDir())
	t.Setenv(gitcache.EnvOffline, "")
	repo := filepath.Join(t.TempDir(), "plugs")
	testsupport.GitCommit(t, repo, map[string]string{
		"team/greeter.star":    "load(\"./lib/common.star\", \"WHO\")\nplug(name = \"team/greeter\")\ndef on_session(ctx, next):\n    next()\n",
		"team/lib/common.star": "WHO = \"v1\"\n",
		"team/escape.star":     "load(\"../../x.star\", \"X\")\n",
	})
	testsupport.Git(t, repo, "tag", "v1")
	f := fixture{repo: repo, dir: t.TempDir(), ref: "git+file://" + repo + "//team/greeter.star@" + rev}
	f.writeConfig(t, f.ref)
	return f
}

func (f fixture) writeConfig(t *testing.T, ref string) {
	t.Helper()
	cfg := "agent(command = \"a\")\nsetup(\n    use(" + `"` + ref + `"` + "),\n)\n"
	if err := os.WriteFile(filepath.Join(f.dir, "blaise.star"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) load(mode pluglock.Mode) (*interp.Config, *pluglock.Resolver, error) {
	res := pluglock.NewResolver(mode)
	l := &interp.Loader{Remote: res}
	cfg, err := l.LoadConfig(filepath.Join(f.dir, "blaise.star"))
	return cfg, res, err
}

func (f fixture) lock(t *testing.T, mode pluglock.Mode) []pluglock.Change {
	t.Helper()
	_, res, err := f.load(mode)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := res.Write(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return changes
}

func (f fixture) readLock(t *testing.T) pluglock.File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, pluglock.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var lf pluglock.File
	if err := json.Unmarshal(data, &lf); err != nil {
		t.Fatal(err)
	}
	return lf
}

// TestLockThenRunUsesThePinnedCommit: a run refuses a reference
// the lock lacks; plugs lock pins it to a commit and a hash; the run then
// loads the plug and the module it loads from its own repository.
func TestLockThenRunUsesThePinnedCommit(t *testing.T) {
	f := newFixture(t, "v1")
	_, _, err := f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:3:8", f.ref, ": not in", "blaise-agent plugs lock")

	changes := f.lock(t, pluglock.Lock)
	head := testsupport.Git(t, f.repo, "rev-parse", "HEAD")
	if len(changes) != 1 || changes[0].New != head || !strings.HasPrefix(changes[0].String(), "added") {
		t.Fatalf("changes = %v, want one added at %s", changes, head)
	}
	e := f.readLock(t).Plugs[f.ref]
	if e.Commit != head || !strings.HasPrefix(e.Hash, "sha256:") {
		t.Fatalf("lock entry = %+v", e)
	}
	cfg, _, err := f.load(pluglock.Locked)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Uses[0].Plug.Name != "team/greeter" || !strings.HasSuffix(cfg.Uses[0].Key, "@"+head) {
		t.Fatalf("use = %s at %s", cfg.Uses[0].Plug.Name, cfg.Uses[0].Key)
	}
}

// TestPinnedCommitRunsWithAWarningWhenItsTagMoved: on a machine with an
// empty cache, a tag moved away from the pinned commit (which no branch
// holds any more) does not stop the run: the commit is fetched by its id,
// used, and the move is named with the command that accepts it.
func TestPinnedCommitRunsWithAWarningWhenItsTagMoved(t *testing.T) {
	f := newFixture(t, "v1")
	testsupport.Git(t, f.repo, "checkout", "--quiet", "-b", "side")
	old := testsupport.GitCommit(t, f.repo, map[string]string{"team/lib/common.star": "WHO = \"pinned\"\n"})
	testsupport.Git(t, f.repo, "tag", "-f", "v1")
	f.lock(t, pluglock.Lock)
	hash := f.readLock(t).Plugs[f.ref].Hash
	testsupport.Git(t, f.repo, "checkout", "--quiet", "main")
	testsupport.Git(t, f.repo, "branch", "--quiet", "-D", "side")
	moved := testsupport.GitCommit(t, f.repo, map[string]string{"team/lib/common.star": "WHO = \"moved\"\n"})
	testsupport.Git(t, f.repo, "tag", "-f", "v1")
	t.Setenv(gitcache.EnvDir, t.TempDir()) // another machine

	res := pluglock.NewResolver(pluglock.Locked)
	var warnings []string
	res.Warn = func(msg string) { warnings = append(warnings, msg) }
	cfg, err := (&interp.Loader{Remote: res}).LoadConfig(filepath.Join(f.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cfg.Uses[0].Key, "@"+old) {
		t.Fatalf("used %s, want the pinned commit %s", cfg.Uses[0].Key, old)
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings = %q, want one", warnings)
	}
	testsupport.WantErr(t, errors.New(warnings[0]), f.ref, "tag v1 moved from commit "+old, moved, "using the pinned commit", "blaise-agent plugs update "+f.ref)
	if f.readLock(t).Plugs[f.ref].Hash != hash {
		t.Fatal("the lock changed")
	}
}

// TestLockClonesADamagedCacheAnew: a blob changed in the cache is not
// locked: plugs lock finds it, clones the repository anew and pins the
// repository's content; offline, where it cannot clone, the error names
// the cache's path and the command that empties it.
func TestLockClonesADamagedCacheAnew(t *testing.T) {
	f := newFixture(t, "v1")
	f.lock(t, pluglock.Lock)
	want := f.readLock(t).Plugs[f.ref]
	c, err := gitcache.Open()
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + f.repo
	blob := testsupport.Git(t, f.repo, "rev-parse", "v1:team/lib/common.star")
	testsupport.TamperObject(t, c.Path(url), blob, "blob", "WHO = \"evil\"\n")

	t.Setenv(gitcache.EnvOffline, "1")
	_, _, err = f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:3:8", "the cache of "+url+" in "+c.Path(url)+" is damaged", blob, "blaise-agent plugs clean")
	t.Setenv(gitcache.EnvOffline, "")

	if err := os.Remove(filepath.Join(f.dir, pluglock.FileName)); err != nil {
		t.Fatal(err)
	}
	f.lock(t, pluglock.Lock)
	if got := f.readLock(t).Plugs[f.ref]; got != want {
		t.Fatalf("locked %+v from the damaged cache, want %+v", got, want)
	}
	if data, err := c.ReadFile(url, want.Commit, "team/lib/common.star", 100); err != nil || string(data) != "WHO = \"v1\"\n" {
		t.Fatalf("cache after locking: %q, %v", data, err)
	}
}

// TestHashMismatchIsRefused: content that does not match the
// lock's hash is refused.
func TestHashMismatchIsRefused(t *testing.T) {
	f := newFixture(t, "v1")
	f.lock(t, pluglock.Lock)
	lf := f.readLock(t)
	e := lf.Plugs[f.ref]
	e.Hash = "sha256:0000"
	lf.Plugs[f.ref] = e
	data, _ := json.Marshal(lf)
	if err := os.WriteFile(filepath.Join(f.dir, pluglock.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:3:8", f.ref, "content hash mismatch", "sha256:0000", "refused")
}

// TestOfflineRunUsesTheCache: with the lock and the cache, a run
// needs no repository; with an empty cache, offline is an error.
func TestOfflineRunUsesTheCache(t *testing.T) {
	f := newFixture(t, "v1")
	f.lock(t, pluglock.Lock)
	if err := os.Rename(f.repo, f.repo+".gone"); err != nil {
		t.Fatal(err)
	}
	t.Setenv(gitcache.EnvOffline, "1")
	if _, _, err := f.load(pluglock.Locked); err != nil {
		t.Fatal(err)
	}
	t.Setenv(gitcache.EnvDir, t.TempDir())
	_, _, err := f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:3:8", f.ref, "offline")
}

// TestUpdateMovesPinsForward: plugs update moves a branch's pin
// to its new commit and says so; plugs lock keeps it.
func TestUpdateMovesPinsForward(t *testing.T) {
	f := newFixture(t, "main")
	f.lock(t, pluglock.Lock)
	old := testsupport.Git(t, f.repo, "rev-parse", "HEAD")
	next := testsupport.GitCommit(t, f.repo, map[string]string{"team/lib/common.star": "WHO = \"v2\"\n"})
	if changes := f.lock(t, pluglock.Lock); len(changes) != 0 {
		t.Fatalf("lock moved pins: %v", changes)
	}
	changes := f.lock(t, pluglock.Update)
	if len(changes) != 1 || changes[0].String() != "moved   "+f.ref+" from "+old+" to "+next {
		t.Fatalf("changes = %v", changes)
	}
	if _, _, err := f.load(pluglock.Locked); err != nil {
		t.Fatal(err)
	}
}

// TestLoadOfAGitReferenceIsLockedToo: load("git+…") in a
// configuration is pinned and checked like use().
func TestLoadOfAGitReferenceIsLockedToo(t *testing.T) {
	f := newFixture(t, "v1")
	mod := "git+file://" + f.repo + "//team/lib/common.star@v1"
	cfg := "load(\"" + mod + "\", \"WHO\")\nagent(command = WHO)\n"
	if err := os.WriteFile(filepath.Join(f.dir, "blaise.star"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.load(pluglock.Locked)
	testsupport.WantErr(t, err, "blaise.star:1:1", mod, ": not in")
	f.lock(t, pluglock.Lock)
	if e := f.readLock(t).Plugs[mod]; !strings.HasPrefix(e.Hash, "sha256:") {
		t.Fatalf("lock entry of %s = %+v", mod, e)
	}
	loaded, _, err := f.load(pluglock.Locked)
	if err != nil || loaded.Agent.Command != "v1" {
		t.Fatalf("config = %+v, %v", loaded, err)
	}
}

// TestMistakeInARemotePlugNamesItsFileAtTheCommit: a plug of a
// repository that fails to load is named with its path and commit.
func TestMistakeInARemotePlugNamesItsFileAtTheCommit(t *testing.T) {
	f := newFixture(t, "main")
	commit := testsupport.GitCommit(t, f.repo, map[string]string{"team/greeter.star": "plug(name = 1)\n"})
	_, _, err := f.load(pluglock.Lock)
	short := "git+file://" + f.repo + "//team/greeter.star@" + commit[:12] + ":1:5"
	testsupport.WantErr(t, err, "blaise.star:3:8", short)
}

// TestErrorsNameTheReferenceAndWhatFailed: unknown ref, path not
// in the repository, unreachable repository, a load() leaving it.
func TestErrorsNameTheReferenceAndWhatFailed(t *testing.T) {
	f := newFixture(t, "v1")
	base := "git+file://" + f.repo + "//"
	for ref, want := range map[string]string{
		base + "team/greeter.star@v9":                       "unknown ref",
		base + "team/nope.star@v1":                          "path team/nope.star not in the repository",
		base + "team/lib@v1":                                "not a regular file",
		base + "team/escape.star@v1":                        "leaves the repository",
		"git+file://" + f.repo + ".missing//x.star@v1":      "cannot fetch",
		"git+file://" + f.repo + "//team/greeter.star@a..b": "invalid revision",
	} {
		f.writeConfig(t, ref)
		_, _, err := f.load(pluglock.Lock)
		testsupport.WantErr(t, err, "blaise.star:3:8", want)
	}
}

// TestCommitReferencePinsThatCommit: @COMMIT names that commit,
// even after the branch has moved on.
func TestCommitReferencePinsThatCommit(t *testing.T) {
	f := newFixture(t, "v1")
	first := testsupport.Git(t, f.repo, "rev-parse", "HEAD")
	testsupport.GitCommit(t, f.repo, map[string]string{"team/lib/common.star": "WHO = \"v2\"\n"})
	ref := "git+file://" + f.repo + "//team/greeter.star@" + first
	f.writeConfig(t, ref)
	f.lock(t, pluglock.Lock)
	if e := f.readLock(t).Plugs[ref]; e.Commit != first {
		t.Fatalf("lock of %s = %+v", ref, e)
	}
}

// TestLockEntryWithAShortCommitStillRuns: a lock edited by hand to name
// its commit by a prefix is read as before, its objects checked all the
// same.
func TestLockEntryWithAShortCommitStillRuns(t *testing.T) {
	f := newFixture(t, "v1")
	f.lock(t, pluglock.Lock)
	lf := f.readLock(t)
	e := lf.Plugs[f.ref]
	e.Commit = e.Commit[:12]
	lf.Plugs[f.ref] = e
	data, _ := json.Marshal(lf)
	if err := os.WriteFile(filepath.Join(f.dir, pluglock.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := f.load(pluglock.Locked)
	if err != nil || cfg.Uses[0].Plug.Name != "team/greeter" {
		t.Fatalf("load: %v", err)
	}
}
