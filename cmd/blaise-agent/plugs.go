package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
	"github.com/blaiseagent/blaise-agent/internal/plugs/starfmt"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
	"github.com/blaiseagent/blaise-agent/internal/support/findconfig"
)

// PlugsCmd is `blaise-agent plugs`.
type PlugsCmd struct {
	Lock     PlugsLockCmd     `cmd:"" help:"Pin every git+ reference of the configuration that blaise.lock lacks to a commit and a content hash; keep the others."`
	Update   PlugsUpdateCmd   `cmd:"" help:"Move the pins of git+ references (all, or those named) to what their tags and branches name now, and print what changed."`
	Outdated PlugsOutdatedCmd `cmd:"" help:"List the git+ references at a version tag whose repository has newer version tags, oldest first."`
	Upgrade  PlugsUpgradeCmd  `cmd:"" help:"Move git+ references at a version tag (all, or those named) to the newest version tag of their repository: rewrite them in the configuration and pin them in blaise.lock."`
	Verify   PlugsVerifyCmd   `cmd:"" help:"Fetch every git+ reference of the configuration into an empty cache and check its commit and content hash against blaise.lock."`
	Clean    PlugsCleanCmd    `cmd:"" help:"Remove from the cache the clones of the repositories that blaise.lock names (with --all, every clone), so that the next use fetches them anew."`
}

// PlugsLockCmd is `blaise-agent plugs lock`.
type PlugsLockCmd struct {
	ConfigFlag
}

// Run writes blaise.lock.
func (c *PlugsLockCmd) Run(g *Globals) error {
	return lockPlugs(c.Config, g, pluglock.NewResolver(pluglock.Lock))
}

// PlugsUpdateCmd is `blaise-agent plugs update`.
type PlugsUpdateCmd struct {
	ConfigFlag
	Refs []string `arg:"" optional:"" name:"ref" help:"git+ references to move, as written in the configuration (default: all)."`
}

// Run moves pins forward.
func (c *PlugsUpdateCmd) Run(g *Globals) error {
	res := pluglock.NewResolver(pluglock.Update)
	res.Only = map[string]bool{}
	for _, r := range c.Refs {
		res.Only[r] = true
	}
	return lockPlugs(c.Config, g, res)
}

// lockPlugs writes the lock and prints its changes.
func lockPlugs(config string, g *Globals, res *pluglock.Resolver) error {
	changes, err := chain.LockPlugs(config, g.Logger(), res)
	if err != nil {
		return err
	}
	printChanges(changes)
	return nil
}

func printChanges(changes []pluglock.Change) {
	for _, ch := range changes {
		fmt.Fprintln(os.Stdout, ch)
	}
	if len(changes) == 0 {
		fmt.Fprintf(os.Stdout, "%s is up to date\n", pluglock.FileName)
	}
}

// PlugsOutdatedCmd is `blaise-agent plugs outdated`.
type PlugsOutdatedCmd struct {
	ConfigFlag
}

// Run lists the newer tags.
func (c *PlugsOutdatedCmd) Run(g *Globals) error {
	refs, err := outdated(c.Config, g, nil)
	if err != nil {
		return err
	}
	for _, o := range refs {
		fmt.Printf("%s: %s\n", o.written, strings.Join(o.newer, " "))
	}
	if len(refs) == 0 {
		fmt.Println("every git+ reference at a version tag is at the newest one")
	}
	return nil
}

// outdatedRef is a reference with the newer version tags of its repository.
type outdatedRef struct {
	written string // as in the configuration
	ref     plugref.Ref
	newer   []string // oldest first
}

// outdated loads the configuration and returns its references (those
// named in only, when given) that have newer version tags.
func outdated(config string, g *Globals, only []string) ([]outdatedRef, error) {
	res := pluglock.NewResolver(pluglock.Lock)
	cfg, err := chain.LoadConfigWith(config, g.Logger(), res)
	if err != nil {
		return nil, err
	}
	pinned := res.Pinned(cfg.Dir)
	names := only
	if len(names) == 0 {
		for ref := range pinned {
			names = append(names, ref)
		}
		sort.Strings(names)
	}
	var refs []outdatedRef
	for _, name := range names {
		if _, ok := pinned[name]; !ok {
			return nil, fmt.Errorf("%s is not a git+ reference of the configuration in %s", name, cfg.Dir)
		}
		r, err := plugref.Parse(name)
		if err != nil {
			return nil, err
		}
		if _, ok := plugref.ParseVersion(r.Rev); !ok {
			if len(only) > 0 {
				return nil, fmt.Errorf("%s: %s is not a version tag (v1.2.3): `blaise-agent plugs update` moves the pin of a branch", name, r.Rev)
			}
			continue
		}
		newer, err := res.NewerTags(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(newer) > 0 {
			refs = append(refs, outdatedRef{written: name, ref: r, newer: newer})
		}
	}
	return refs, nil
}

// PlugsUpgradeCmd is `blaise-agent plugs upgrade`.
type PlugsUpgradeCmd struct {
	ConfigFlag
	Refs []string `arg:"" optional:"" name:"ref" help:"git+ references to move, as written in the configuration (default: all at a version tag)."`
}

// Run rewrites the references in the configuration, then locks them; the
// configuration is put back when locking fails.
func (c *PlugsUpgradeCmd) Run(g *Globals) error {
	refs, err := outdated(c.Config, g, c.Refs)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		fmt.Println("every git+ reference at a version tag is at the newest one")
		return nil
	}
	src, err := os.ReadFile(c.Config)
	if err != nil {
		return err
	}
	info, err := os.Stat(c.Config)
	if err != nil {
		return err
	}
	out := src
	for _, o := range refs {
		var n int
		out, n, err = starfmt.ReplaceString(c.Config, out, o.written, o.ref.At(o.newer[len(o.newer)-1]).String())
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s is not written as one string in %s: change it where it is written, then run `blaise-agent plugs lock`", o.written, c.Config)
		}
	}
	if err := atomicfile.Write(c.Config, out, info.Mode().Perm(), false); err != nil {
		return err
	}
	changes, err := chain.LockPlugs(c.Config, g.Logger(), pluglock.NewResolver(pluglock.Lock))
	if err != nil {
		if restoreErr := atomicfile.Write(c.Config, src, info.Mode().Perm(), false); restoreErr != nil {
			return fmt.Errorf("%w; and putting back %s failed: %v", err, c.Config, restoreErr)
		}
		return fmt.Errorf("%w (%s is left as it was)", err, c.Config)
	}
	for _, o := range refs {
		fmt.Printf("upgraded %s to %s\n", o.written, o.newer[len(o.newer)-1])
	}
	printChanges(changes)
	return nil
}

// PlugsVerifyCmd is `blaise-agent plugs verify`.
type PlugsVerifyCmd struct {
	ConfigFlag
}

// Run loads the configuration as a run would, from a cache of its own
// that starts empty and is removed after.
func (c *PlugsVerifyCmd) Run(g *Globals) error {
	cache, err := gitcache.Open()
	if err != nil {
		return err
	}
	if cache.Dir, err = os.MkdirTemp("", "blaise-plugs-verify-"); err != nil {
		return err
	}
	defer os.RemoveAll(cache.Dir)
	res := pluglock.NewResolver(pluglock.Locked)
	res.Cache = cache
	cfg, err := chain.LoadConfigWith(c.Config, g.Logger(), res)
	if err != nil {
		return err
	}
	pinned := res.Pinned(cfg.Dir)
	refs := make([]string, 0, len(pinned))
	for ref := range pinned {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		fmt.Printf("verified %s at %s (%s)\n", ref, pinned[ref].Commit, pinned[ref].Hash)
	}
	if len(refs) == 0 {
		fmt.Println("no git+ references to verify")
	}
	return nil
}

// PlugsCleanCmd is `blaise-agent plugs clean`. Its configuration is
// looked for only without --all.
type PlugsCleanCmd struct {
	Config string `short:"c" help:"The configuration file whose blaise.lock names the repositories (default: the nearest blaise.star in the working directory or a parent)." type:"path" env:"BLAISE_CONFIG" predictor:"star" placeholder:"FILE"`
	All    bool   `help:"Empty the whole cache: the clones of every configuration of the user."`
}

// Run removes clones.
func (c *PlugsCleanCmd) Run(g *Globals) error {
	cache, err := gitcache.Open()
	if err != nil {
		return err
	}
	if c.All {
		if err := cache.Clean(); err != nil {
			return err
		}
		fmt.Printf("emptied %s\n", cache.Dir)
		return nil
	}
	config := c.Config
	if config == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if config, err = findconfig.Nearest(wd); err != nil {
			return err
		}
	}
	lock, _, err := pluglock.Read(filepath.Dir(config))
	if err != nil {
		return err
	}
	repos := map[string]bool{}
	for ref := range lock.Plugs {
		if r, err := plugref.Parse(ref); err == nil {
			repos[r.Repo] = true
		}
	}
	names := make([]string, 0, len(repos))
	for repo := range repos {
		names = append(names, repo)
	}
	sort.Strings(names)
	for _, repo := range names {
		if err := cache.Remove(repo); err != nil {
			return err
		}
		fmt.Printf("removed %s (%s)\n", repo, cache.Path(repo))
	}
	if len(names) == 0 {
		fmt.Printf("%s names no repository: nothing to remove\n", filepath.Join(filepath.Dir(config), pluglock.FileName))
	}
	return nil
}
