// Package gitcache keeps bare clones of the git repositories that plugs
// come from, shared by every process of the user: filled with the git
// command under a file lock per repository, and read by commit, never
// through a work tree that could move.
package gitcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
)

// Environment variables that choose the cache and forbid the network.
const (
	EnvDir     = "BLAISE_CACHE_DIR"
	EnvOffline = "BLAISE_OFFLINE"
)

// ErrOffline is the cause of a fetch that offline mode refused.
var ErrOffline = errors.New("offline")

// Cache is a directory of bare repositories, one per URL.
type Cache struct {
	Dir     string
	Offline bool // a fetch is an error
}

// Open returns the cache of $BLAISE_CACHE_DIR, else of the user's cache
// directory, offline when $BLAISE_OFFLINE is 1.
func Open() (*Cache, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory for plugs of git repositories (set %s): %w", EnvDir, err)
		}
		dir = filepath.Join(base, "blaise-agent", "git")
	}
	return &Cache{Dir: dir, Offline: os.Getenv(EnvOffline) == "1"}, nil
}

// repoDir is where the bare clone of url lives.
func (c *Cache) repoDir(url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(c.Dir, hex.EncodeToString(sum[:12])+".git")
}

// Fetch brings the branches and tags of url into the cache, cloning it
// the first time. Two processes fetching the same URL take turns.
func (c *Cache) Fetch(url string) error {
	return c.fetch(url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
}

// FetchCommit brings commit of url into the cache by its id: a commit that
// no branch or tag names any more (a tag moved). A ref of the cache's own
// keeps it there.
func (c *Cache) FetchCommit(url, commit string) error {
	if !plugref.IsCommit(commit) {
		return fmt.Errorf("fetch %s: %q is not a commit id", url, commit)
	}
	return c.fetch(url, "+"+commit+":refs/pinned/"+commit)
}

func (c *Cache) fetch(url string, refspecs ...string) error {
	if c.Offline {
		return fmt.Errorf("fetch %s: %w (%s=1 or --offline), and the cache does not hold what is needed", url, ErrOffline, EnvOffline)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("cache of git repositories: %w", err)
	}
	dir := c.repoDir(url)
	lock := flock.New(dir + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock the cache of %s: %w", url, err)
	}
	defer lock.Unlock()
	target := dir
	if _, err := os.Stat(dir); err != nil {
		// A clone appears only once complete, so readers never see half.
		target = dir + ".new"
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("cache of %s: %w", url, err)
		}
		if _, err := git("", "init", "--quiet", "--bare", target); err != nil {
			return fmt.Errorf("cache of %s: %w", url, err)
		}
	}
	args := append([]string{"fetch", "--quiet", "--force", "--prune", "--no-tags", url}, refspecs...)
	if _, err := git(target, args...); err != nil {
		return fmt.Errorf("cannot fetch %s (unreachable?): %w", url, err)
	}
	if target != dir {
		if err := os.Rename(target, dir); err != nil {
			return fmt.Errorf("cache of %s: %w", url, err)
		}
	}
	return nil
}

// Remove drops the clone of url from the cache, so that the next fetch
// clones it anew.
func (c *Cache) Remove(url string) error {
	return c.remove(c.repoDir(url))
}

// Clean empties the cache, taking the lock of each repository in turn.
func (c *Cache) Clean() error {
	clones, err := filepath.Glob(filepath.Join(c.Dir, "*.git"))
	if err != nil {
		return err
	}
	for _, dir := range clones {
		if err := c.remove(dir); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cache) remove(dir string) error {
	lock := flock.New(dir + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer lock.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s from the cache: %w", dir, err)
	}
	return nil
}

// Path is where the clone of url is kept, for messages.
func (c *Cache) Path(url string) string { return c.repoDir(url) }

// Has reports whether the cache holds commit of url.
func (c *Cache) Has(url, commit string) bool {
	_, err := git(c.repoDir(url), "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// Resolve returns the commit that rev names in the cached url, and whether
// rev is a tag (tags do not move; branches do).
func (c *Cache) Resolve(url, rev string) (commit string, tag bool, err error) {
	dir := c.repoDir(url)
	names := []string{"refs/tags/" + rev, "refs/heads/" + rev}
	if plugref.IsCommit(rev) {
		names = append(names, rev)
	}
	for i, name := range names {
		if out, err := git(dir, "rev-parse", "--verify", "--quiet", name+"^{commit}"); err == nil {
			return strings.TrimSpace(string(out)), i == 0, nil
		}
	}
	return "", false, fmt.Errorf("unknown ref: no tag, branch or commit %q in %s", rev, url)
}

// Tags lists the tags of the cached url.
func (c *Cache) Tags(url string) ([]string, error) {
	out, err := git(c.repoDir(url), "for-each-ref", "--format=%(refname:strip=2)", "refs/tags")
	if err != nil {
		return nil, fmt.Errorf("tags of %s: %w", url, err)
	}
	return strings.Fields(string(out)), nil
}

// ReadFile returns the file at path in commit of the cached url, refusing
// directories, links and files larger than limit bytes. Each object on
// the way, the commit, the trees and the blob, is checked to hash to its
// id, so that a clone altered or damaged on disk is found (a *DamagedError)
// and never read as the repository's content.
func (c *Cache) ReadFile(url, commit, path string, limit int64) ([]byte, error) {
	dir := c.repoDir(url)
	objs, err := openObjects(dir)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: %w", commit, url, err)
	}
	defer objs.close()
	damaged := func(id string) error { return &DamagedError{URL: url, Dir: dir, Object: id} }
	data, err := objs.read(commit, "commit", -1, damaged)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: %w", commit, url, err)
	}
	tree, ok := strings.CutPrefix(strings.SplitN(string(data), "\n", 2)[0], "tree ")
	if !ok {
		return nil, damaged(commit)
	}
	id, mode := tree, "40000"
	for _, name := range strings.Split(path, "/") {
		if mode != "40000" {
			return nil, fmt.Errorf("path %s not in the repository %s at commit %s", path, url, commit)
		}
		data, err := objs.read(id, "tree", -1, damaged)
		if err != nil {
			return nil, err
		}
		if id, mode, ok = treeEntry(data, name, len(id)/2); !ok {
			return nil, fmt.Errorf("path %s not in the repository %s at commit %s", path, url, commit)
		}
	}
	if mode != "100644" && mode != "100755" {
		return nil, fmt.Errorf("%s in %s at commit %s is not a regular file", path, url, commit)
	}
	data, err = objs.read(id, "blob", limit, damaged)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s in %s at commit %s is larger than the limit of %d bytes", path, url, commit, limit)
	}
	return data, err
}

// DamagedError is a cached object that does not hash to its id: the clone
// was altered or damaged on disk.
type DamagedError struct {
	URL, Dir, Object string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the cache of %s in %s is damaged: object %s does not hash to its id (`blaise-agent plugs clean` empties the cache)", e.URL, e.Dir, e.Object)
}

// treeEntry finds name in the content of a tree object whose ids are
// idLen bytes: entries are "MODE NAME\0ID".
func treeEntry(tree []byte, name string, idLen int) (id, mode string, ok bool) {
	for len(tree) > 0 {
		sp := bytes.IndexByte(tree, ' ')
		nul := bytes.IndexByte(tree, 0)
		if sp < 0 || nul < sp || len(tree) < nul+1+idLen {
			return "", "", false
		}
		if string(tree[sp+1:nul]) == name {
			return hex.EncodeToString(tree[nul+1 : nul+1+idLen]), string(tree[:sp]), true
		}
		tree = tree[nul+1+idLen:]
	}
	return "", "", false
}

// git runs git in dir (a bare repository, or none) and returns its
// output; its error carries what git said.
func git(dir string, args ...string) ([]byte, error) {
	if dir != "" {
		args = append([]string{"--git-dir", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := gitSaid(stderr.String())
		if msg == "" {
			return nil, fmt.Errorf("git %s: %w", args[len(args)-1], err)
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return out, nil
}

// gitSaid picks the line of git's stderr that says what failed: its first
// fatal or error line, else its last line.
func gitSaid(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: ") {
			return l
		}
	}
	return lines[len(lines)-1]
}
