package plugref

import (
	"reflect"
	"testing"
)

// TestNewerSortsTagsAsSemanticVersions: v1.10.0 comes after v1.9.0, a
// prerelease before its release, and tags that are not versions are left
// out; a branch has no newer tags.
func TestNewerSortsTagsAsSemanticVersions(t *testing.T) {
	tags := []string{"v1.10.0", "v1.9.0", "v1.0.0", "v0.9.0", "latest", "v2.0.0-rc.1", "v1.2", "1.11.0", "v01.2.3", "v1.9.0+build.5"}
	for rev, want := range map[string][]string{
		"v1.0.0":      {"v1.9.0", "v1.9.0+build.5", "v1.10.0", "1.11.0"},
		"v1.10.0":     {"1.11.0"},
		"1.11.0":      nil,
		"v2.0.0-rc.0": {"v2.0.0-rc.1"},
		"v2.0.0-beta": {"v2.0.0-rc.1"},
		"main":        nil,
	} {
		if got := Newer(rev, tags); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("Newer(%q) = %q, want %q", rev, got, want)
		}
	}
}

// TestVersionCompareFollowsSemanticVersioning: the order of the examples
// of semver.org, section 11.
func TestVersionCompareFollowsSemanticVersioning(t *testing.T) {
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "2.0.0", "2.1.0", "2.1.1"}
	for i := range order {
		for j := range order {
			a, _ := ParseVersion(order[i])
			b, _ := ParseVersion(order[j])
			if got, want := a.Compare(b), sign(i-j); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}
