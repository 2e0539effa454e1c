// Package pluglock pins the plugs of git repositories that a configuration
// uses: blaise.lock, beside the configuration, names the commit and the
// content hash of each git+ reference, and runs use only what it names.
package pluglock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
)

// FileName is the lock file, beside the configuration.
const FileName = "blaise.lock"

// Entry pins one reference.
type Entry struct {
	Commit string `json:"commit"`
	Hash   string `json:"hash"` // sha256 of the plug file and every file it loads
}

// File is the content of blaise.lock.
type File struct {
	Version int              `json:"version"`
	Plugs   map[string]Entry `json:"plugs"` // by reference as written
}

// fileVersion is the format of blaise.lock this program writes and reads.
const fileVersion = 1

// Mode is what a Resolver does with references that the lock does not pin.
type Mode int

const (
	// Locked uses only what the lock names: runs, check, test.
	Locked Mode = iota
	// Lock pins references the lock lacks and keeps the others.
	Lock
	// Update moves the pins of the references in Resolver.Only (all when
	// empty) to what their revisions name now.
	Update
)

// Resolver implements interp.Remote with a lock file and a cache.
type Resolver struct {
	Mode Mode
	Only map[string]bool // for Update: the references to move
	// Cache holds the clones; nil is the user's (gitcache.Open).
	Cache *gitcache.Cache
	// Warn receives what a run goes on despite: a tag that moved away
	// from its pinned commit. Nil drops it.
	Warn func(msg string)

	locks   map[string]*state // by directory
	fetched map[string]bool   // repositories fetched by this process
	renewed map[string]bool   // repositories cloned anew by this process
}

// state is a lock file as read, and the lock being made.
type state struct {
	old, now File
	exists   bool // the file was there
}

// NewResolver returns a resolver in mode over the user's cache.
func NewResolver(mode Mode) *Resolver {
	return &Resolver{Mode: mode, locks: map[string]*state{}, fetched: map[string]bool{}, renewed: map[string]bool{}}
}

func (r *Resolver) openCache() (*gitcache.Cache, error) {
	if r.Cache == nil {
		c, err := gitcache.Open()
		if err != nil {
			return nil, err
		}
		r.Cache = c
	}
	return r.Cache, nil
}

// lock returns the lock file of dir, read on first use.
func (r *Resolver) lock(dir string) (*state, error) {
	if st, ok := r.locks[dir]; ok {
		return st, nil
	}
	old, exists, err := Read(dir)
	if err != nil {
		return nil, err
	}
	st := &state{old: old, now: File{Version: fileVersion, Plugs: map[string]Entry{}}, exists: exists}
	r.locks[dir] = st
	return st, nil
}

// Read returns the lock file of dir, empty when there is none.
func Read(dir string) (f File, exists bool, err error) {
	f = File{Version: fileVersion, Plugs: map[string]Entry{}}
	name := filepath.Join(dir, FileName)
	data, err := os.ReadFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, false, nil
	case err != nil:
		return f, false, fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, true, fmt.Errorf("%s: not a lock file: %w", name, err)
	}
	if f.Version != fileVersion {
		return f, true, fmt.Errorf("%s: version %d, want %d", name, f.Version, fileVersion)
	}
	return f, true, nil
}

// Pinned returns what the configuration in dir loaded so far pins, by
// reference as written.
func (r *Resolver) Pinned(dir string) map[string]Entry {
	if st, ok := r.locks[dir]; ok {
		return st.now.Plugs
	}
	return nil
}

// NewerTags returns the tags of ref's repository that are versions above
// its revision, oldest first (none when the revision is a branch or a
// commit), fetching the repository once.
func (r *Resolver) NewerTags(ref plugref.Ref) ([]string, error) {
	c, err := r.openCache()
	if err != nil {
		return nil, err
	}
	if err := r.fetch(c, ref.Repo); err != nil {
		return nil, err
	}
	tags, err := c.Tags(ref.Repo)
	if err != nil {
		return nil, err
	}
	return plugref.Newer(ref.Rev, tags), nil
}

// fetch fetches repo once per process.
func (r *Resolver) fetch(c *gitcache.Cache, repo string) error {
	if r.fetched[repo] {
		return nil
	}
	if err := c.Fetch(repo); err != nil {
		return err
	}
	r.fetched[repo] = true
	return nil
}

// Pin returns the commit ref is pinned to, fetching only when the cache
// lacks what is needed.
func (r *Resolver) Pin(dir string, ref plugref.Ref) (string, error) {
	st, err := r.lock(dir)
	if err != nil {
		return "", err
	}
	c, err := r.openCache()
	if err != nil {
		return "", err
	}
	key := ref.String()
	if e, ok := st.now.Plugs[key]; ok {
		return e.Commit, nil
	}
	e, locked := st.old.Plugs[key]
	move := r.Mode == Update && (len(r.Only) == 0 || r.Only[key])
	if !locked || move {
		if r.Mode == Locked {
			return "", fmt.Errorf("not in %s: run `blaise-agent plugs lock` to pin it", filepath.Join(dir, FileName))
		}
		if err := r.fetch(c, ref.Repo); err != nil {
			return "", err
		}
		commit, _, err := c.Resolve(ref.Repo, ref.Rev)
		if err != nil {
			return "", err
		}
		st.now.Plugs[key] = Entry{Commit: commit}
		return commit, nil
	}
	if !c.Has(ref.Repo, e.Commit) {
		if err := r.fetchCommit(c, ref.Repo, e.Commit); err != nil {
			return "", fmt.Errorf("pinned to commit %s: %w", e.Commit, err)
		}
		// A tag names one commit for good; one that moved is named, and
		// the pinned commit is what runs.
		if commit, tag, err := c.Resolve(ref.Repo, ref.Rev); err == nil && tag && commit != e.Commit && r.Warn != nil {
			r.Warn(fmt.Sprintf("%s: tag %s moved from commit %s (in %s) to %s; using the pinned commit. Run `blaise-agent plugs update %s` to move to the tag's commit", key, ref.Rev, e.Commit, FileName, commit, key))
		}
	}
	st.now.Plugs[key] = Entry{Commit: e.Commit}
	return e.Commit, nil
}

// fetchCommit brings commit of repo into the cache: with its branches and
// tags, else by its id (a tag moved away from it).
func (r *Resolver) fetchCommit(c *gitcache.Cache, repo, commit string) error {
	if err := r.fetch(c, repo); err != nil {
		return err
	}
	if c.Has(repo, commit) {
		return nil
	}
	if err := c.FetchCommit(repo, commit); err != nil || !c.Has(repo, commit) {
		return fmt.Errorf("commit %s of %s is not in the repository", commit, FileName)
	}
	return nil
}

// Read returns a file of a cached repository at a commit. A clone found
// damaged is cloned anew once (not offline), so that nothing but the
// repository's content is read.
func (r *Resolver) Read(ref plugref.Ref, limit int64) ([]byte, error) {
	c, err := r.openCache()
	if err != nil {
		return nil, err
	}
	data, err := c.ReadFile(ref.Repo, ref.Rev, ref.Path, limit)
	var damaged *gitcache.DamagedError
	if !errors.As(err, &damaged) || r.renewed[ref.Repo] || c.Offline {
		return data, err
	}
	r.renewed[ref.Repo] = true
	if rmErr := c.Remove(ref.Repo); rmErr != nil {
		return nil, fmt.Errorf("%w: %v", err, rmErr)
	}
	r.fetched[ref.Repo] = false
	if fetchErr := r.fetchCommit(c, ref.Repo, ref.Rev); fetchErr != nil {
		return nil, fmt.Errorf("%w, and cloning it anew failed (%v): run `blaise-agent plugs clean` where the repository can be reached", err, fetchErr)
	}
	return c.ReadFile(ref.Repo, ref.Rev, ref.Path, limit)
}

// Check compares the content hash of ref with the lock, or records it for
// a pin this resolver made.
func (r *Resolver) Check(dir string, ref plugref.Ref, commit, hash string) error {
	st, err := r.lock(dir)
	if err != nil {
		return err
	}
	key := ref.String()
	if e, ok := st.old.Plugs[key]; ok && e.Commit == commit && e.Hash != hash {
		return fmt.Errorf("content hash mismatch at commit %s: %s holds %s, the repository has %s: refused", commit, FileName, e.Hash, hash)
	}
	st.now.Plugs[key] = Entry{Commit: commit, Hash: hash}
	return nil
}

// Change is what writing a lock did to one reference.
type Change struct {
	Ref      string
	Old, New string // commits; empty when added or removed
}

func (c Change) String() string {
	switch {
	case c.Old == "":
		return fmt.Sprintf("added   %s at %s", c.Ref, c.New)
	case c.New == "":
		return fmt.Sprintf("removed %s (was at %s)", c.Ref, c.Old)
	default:
		return fmt.Sprintf("moved   %s from %s to %s", c.Ref, c.Old, c.New)
	}
}

// Write writes the lock of dir with the references loaded since it was
// read, and returns what changed.
func (r *Resolver) Write(dir string) ([]Change, error) {
	st, err := r.lock(dir)
	if err != nil {
		return nil, err
	}
	for ref := range r.Only {
		if _, ok := st.now.Plugs[ref]; !ok {
			return nil, fmt.Errorf("%s is not a git+ reference of the configuration in %s", ref, dir)
		}
	}
	var changes []Change
	for ref, e := range st.now.Plugs {
		if old, ok := st.old.Plugs[ref]; !ok || old.Commit != e.Commit {
			changes = append(changes, Change{Ref: ref, Old: old.Commit, New: e.Commit})
		}
	}
	for ref, old := range st.old.Plugs {
		if _, ok := st.now.Plugs[ref]; !ok {
			changes = append(changes, Change{Ref: ref, Old: old.Commit})
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Ref < changes[j].Ref })
	if !st.exists && len(st.now.Plugs) == 0 {
		return nil, nil // nothing to pin: no file to keep
	}
	data, err := json.MarshalIndent(st.now, "", "  ")
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, FileName)
	tmp := name + ".new"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	return changes, nil
}
