package interp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
)

// Remote gives the loader the plugs of git repositories, pinned by a lock
// file in the directory of the configuration.
type Remote interface {
	// Pin returns the commit that ref is pinned to for the configuration
	// in dir.
	Pin(dir string, ref plugref.Ref) (commit string, err error)
	// Read returns a file of a repository; ref.Rev is a commit.
	Read(ref plugref.Ref, limit int64) ([]byte, error)
	// Check compares, or records, the content hash of ref pinned to commit.
	Check(dir string, ref plugref.Ref, commit, hash string) error
}

// resolveRemote turns a git+ reference into the key of its file at the
// pinned commit.
func (l *Loader) resolveRemote(ref string) (string, error) {
	r, err := plugref.Parse(ref)
	if err != nil {
		return "", err
	}
	if l.Remote == nil {
		return "", fmt.Errorf("plugs of git repositories are not available here")
	}
	commit, err := l.Remote.Pin(l.lockDir, r)
	if err != nil {
		return "", err
	}
	return r.At(commit).String(), nil
}

// resolveInRemote resolves ref, written in the remote file from, in the
// same repository at the same commit.
func resolveInRemote(ref string, from plugref.Ref) (string, error) {
	if path.IsAbs(ref) || filepath.IsAbs(ref) {
		return "", fmt.Errorf("%s cannot reference the file %q outside its repository", from, ref)
	}
	name := path.Join(path.Dir(from.Path), ref)
	if name == "." || strings.HasPrefix(name, "../") || name == ".." {
		return "", fmt.Errorf("reference %q leaves the repository %s", ref, from.Repo)
	}
	from.Path = name
	return from.String(), nil
}

// checkRemote verifies the content hash of a git+ reference once its file
// and all it loads are loaded.
func (l *Loader) checkRemote(ref, key string) error {
	if !plugref.IsRemote(ref) {
		return nil
	}
	r, _ := plugref.Parse(ref)
	pinned, _ := plugref.Parse(key)
	return l.Remote.Check(l.lockDir, r, pinned.Rev, l.contentHash(key))
}

// contentHash is the sha256 of the file with key and of every file of the
// same repository and commit that it loads, directly or not.
func (l *Loader) contentHash(key string) string {
	root, _ := plugref.Parse(key)
	sums := map[string]string{}
	var walk func(k string)
	walk = func(k string) {
		r, err := plugref.Parse(k)
		m := l.modules[k]
		if err != nil || r.Repo != root.Repo || r.Rev != root.Rev || m == nil {
			return
		}
		if _, seen := sums[r.Path]; seen {
			return
		}
		sums[r.Path] = hex.EncodeToString(m.sum[:])
		for _, d := range m.deps {
			walk(d)
		}
	}
	walk(key)
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\n", n, sums[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// remoteDisplay shortens the commit of a remote key in messages.
func remoteDisplay(key string) string {
	r, err := plugref.Parse(key)
	if err != nil || len(r.Rev) < 12 {
		return key
	}
	return r.At(r.Rev[:12]).String()
}
