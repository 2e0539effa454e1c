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
	"strconv"
	"strings"

	"github.com/gofrs/flock"

	"github.com/blaiseagent/blaise-agent/plugref"
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
	if _, err := git(target, "fetch", "--quiet", "--force", "--prune", "--no-tags", url,
		"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
		return fmt.Errorf("cannot fetch %s (unreachable?): %w", url, err)
	}
	if target != dir {
		if err := os.Rename(target, dir); err != nil {
			return fmt.Errorf("cache of %s: %w", url, err)
		}
	}
	return nil
}

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

// ReadFile returns the file at path in commit of the cached url, refusing
// directories, links and files larger than limit bytes.
func (c *Cache) ReadFile(url, commit, path string, limit int64) ([]byte, error) {
	dir := c.repoDir(url)
	out, err := git(dir, "ls-tree", "-z", "-l", commit, "--", path)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: %w", commit, url, err)
	}
	// mode type object size\tpath\0
	info, name, _ := strings.Cut(strings.TrimSuffix(string(out), "\x00"), "\t")
	fields := strings.Fields(info)
	if len(fields) != 4 || name != path {
		return nil, fmt.Errorf("path %s not in the repository %s at commit %s", path, url, commit)
	}
	if fields[1] != "blob" || fields[0] == "120000" {
		return nil, fmt.Errorf("%s in %s at commit %s is not a regular file", path, url, commit)
	}
	if size, err := strconv.ParseInt(fields[3], 10, 64); err != nil || size > limit {
		return nil, fmt.Errorf("%s in %s at commit %s is larger than the limit of %d bytes", path, url, commit, limit)
	}
	return git(dir, "cat-file", "blob", fields[2])
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
