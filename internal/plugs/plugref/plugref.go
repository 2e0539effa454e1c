// Package plugref parses references to plugs in git repositories:
// git+SCHEME://HOST/REPO//PATH/IN/REPO.star@REV, where SCHEME is https,
// ssh, git (git daemon) or file and REV a tag, a branch or a commit.
package plugref

import (
	"fmt"
	"io/fs"
	"strings"
)

// Prefix starts every reference to a git repository.
const Prefix = "git+"

// Schemes are the URL schemes a reference may use.
var Schemes = []string{"https", "ssh", "git", "file"}

// Ref is a parsed reference.
type Ref struct {
	Repo string // the URL git fetches, without Prefix
	Path string // the file in the repository, slash-separated, relative
	Rev  string // a tag, a branch or a commit
}

// IsRemote reports whether s is meant as a reference to a git repository.
func IsRemote(s string) bool { return strings.HasPrefix(s, Prefix) }

// String is the reference as written: Parse(r.String()) == r.
func (r Ref) String() string { return Prefix + r.Repo + "//" + r.Path + "@" + r.Rev }

// At returns r with its revision replaced, e.g. by the commit it names.
func (r Ref) At(rev string) Ref { r.Rev = rev; return r }

// Parse parses s, saying which part is wrong when it fails.
func Parse(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Ref{}, fmt.Errorf("reference %q: want it to start with %q", s, Prefix)
	}
	scheme, afterScheme, ok := strings.Cut(rest, "://")
	if !ok || !validScheme(scheme) {
		return Ref{}, fmt.Errorf("reference %q: want a URL scheme %s after %q", s, strings.Join(Schemes, ", "), Prefix)
	}
	// The repository ends at the first "//" after the host; a file URL
	// has an empty host, so its path starts right after "file://".
	hostEnd := strings.IndexByte(afterScheme, '/')
	if hostEnd < 0 {
		return Ref{}, fmt.Errorf("reference %q: want //PATH/IN/REPO.star@REV after the repository URL", s)
	}
	sep := strings.Index(afterScheme[hostEnd+1:], "//")
	if sep < 0 {
		return Ref{}, fmt.Errorf("reference %q: want //PATH/IN/REPO.star@REV after the repository URL", s)
	}
	repo := afterScheme[:hostEnd+1+sep]
	file := afterScheme[hostEnd+1+sep+2:]
	at := strings.LastIndexByte(file, '@')
	if at < 0 {
		return Ref{}, fmt.Errorf("reference %q: want @REV (a tag, branch or commit) after the path in the repository", s)
	}
	r := Ref{Repo: scheme + "://" + repo, Path: file[:at], Rev: file[at+1:]}
	if scheme != "file" && hostEnd == 0 {
		return Ref{}, fmt.Errorf("reference %q: want a host in the repository URL %q", s, r.Repo)
	}
	if strings.TrimLeft(repo, "/") == "" || strings.ContainsAny(repo, " \t\r\n\x00") {
		return Ref{}, fmt.Errorf("reference %q: invalid repository URL %q", s, r.Repo)
	}
	if !fs.ValidPath(r.Path) || r.Path == "." {
		return Ref{}, fmt.Errorf("reference %q: invalid path in the repository %q: want a relative path such as plugs/x.star", s, r.Path)
	}
	if err := checkRev(r.Rev); err != nil {
		return Ref{}, fmt.Errorf("reference %q: %w", s, err)
	}
	return r, nil
}

func validScheme(s string) bool {
	for _, v := range Schemes {
		if s == v {
			return true
		}
	}
	return false
}

// checkRev refuses revisions git would read as something else: options,
// ranges, reflog and path syntax.
func checkRev(rev string) error {
	switch {
	case rev == "":
		return fmt.Errorf("empty revision after @: want a tag, branch or commit")
	case strings.HasPrefix(rev, "-"), strings.HasPrefix(rev, "/"), strings.HasSuffix(rev, "/"),
		strings.HasSuffix(rev, ".lock"), strings.Contains(rev, ".."), strings.Contains(rev, "@{"),
		strings.Contains(rev, "//"):
		return fmt.Errorf("invalid revision %q: want a tag, branch or commit", rev)
	}
	for _, c := range rev {
		if c <= ' ' || c == 0x7f || strings.ContainsRune(`~^:?*[\`, c) {
			return fmt.Errorf("invalid revision %q: %q is not allowed in a tag, branch or commit", rev, c)
		}
	}
	return nil
}

// IsCommit reports whether rev is a full commit id.
func IsCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for _, c := range rev {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
