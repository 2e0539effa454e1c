package plugref_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestPlugReferencesParse: https, ssh and file URLs, with a tag, branch or
// commit.
func TestPlugReferencesParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want plugref.Ref
	}{
		{"git+https://host/org/plugs.git//worktree.star@v1.2.0", plugref.Ref{Repo: "https://host/org/plugs.git", Path: "worktree.star", Rev: "v1.2.0"}},
		{"git+ssh://git@host:22/org/plugs.git//sub/x.star@main", plugref.Ref{Repo: "ssh://git@host:22/org/plugs.git", Path: "sub/x.star", Rev: "main"}},
		{"git+file:///tmp/plugs//a/b.star@0123456789abcdef0123456789abcdef01234567", plugref.Ref{Repo: "file:///tmp/plugs", Path: "a/b.star", Rev: "0123456789abcdef0123456789abcdef01234567"}},
		{"git+https://host/p//x@y.star@feature/one", plugref.Ref{Repo: "https://host/p", Path: "x@y.star", Rev: "feature/one"}},
	} {
		got, err := plugref.Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("String() = %q, want %q", got.String(), c.in)
		}
	}
}

// TestBadReferencesSayWhichPart: every error names the reference and the
// part that is wrong.
func TestBadReferencesSayWhichPart(t *testing.T) {
	for in, want := range map[string]string{
		"https://host/p//x.star@v1":       `want it to start with "git+"`,
		"git+ftp://host/p//x.star@v1":     "want a URL scheme https, ssh, git, file",
		"git+https://host/p/x.star@v1":    "want //PATH/IN/REPO.star@REV",
		"git+https://host":                "want //PATH/IN/REPO.star@REV",
		"git+https://host/p//x.star":      "want @REV",
		"git+https:///p//x.star@v1":       "want a host",
		"git+file://////x.star@v1":        "invalid repository URL",
		"git+https://host/p//../x@v1":     "invalid path in the repository",
		"git+https://host/p//x.star@":     "empty revision",
		"git+https://host/p//x.star@-u":   `invalid revision "-u"`,
		"git+https://host/p//x.star@a..b": `invalid revision "a..b"`,
		"git+https://host/p//x.star@a b":  `' ' is not allowed`,
	} {
		_, err := plugref.Parse(in)
		testsupport.WantErr(t, err, in, want)
	}
}

// FuzzParse: the parser never panics, a reference it accepts prints back
// as itself, and every error names the reference.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"git+https://host/org/plugs.git//worktree.star@v1.2.0",
		"git+ssh://git@host/org/plugs.git//a/b.star@main",
		"git+file:///tmp/r//x.star@0123456789abcdef0123456789abcdef01234567",
		"git+file:///tmp/r//x.star",
		"git+https://h//@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := plugref.Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), "reference "+strconv.Quote(s)) {
				t.Fatalf("error %q does not name the reference", err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, r.String())
		}
		if again, err := plugref.Parse(r.String()); err != nil || again != r {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
	})
}
