package plugref

import (
	"sort"
	"strconv"
	"strings"
)

// Version is a tag read as a semantic version: v1.2.3 or 1.2.3, with an
// optional -PRERELEASE and +BUILD.
type Version struct {
	Tag                 string
	Major, Minor, Patch int
	Pre                 []string // dot-separated identifiers after -
}

// ParseVersion reads tag as a semantic version.
func ParseVersion(tag string) (Version, bool) {
	s := strings.TrimPrefix(tag, "v")
	s, _, _ = strings.Cut(s, "+")
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 || (hasPre && pre == "") {
		return Version{}, false
	}
	v := Version{Tag: tag}
	nums := [3]*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		// Digits only, without leading zeros.
		n, err := strconv.Atoi(p)
		if err != nil || strings.TrimLeft(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
			return Version{}, false
		}
		*nums[i] = n
	}
	if hasPre {
		v.Pre = strings.Split(pre, ".")
	}
	return v, true
}

// Compare orders versions as semantic versioning does: by number, a
// prerelease before its release; -1, 0 or 1.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d != 0 {
			return sign(d)
		}
	}
	switch {
	case len(v.Pre) == 0 && len(w.Pre) == 0:
		return 0
	case len(v.Pre) == 0:
		return 1
	case len(w.Pre) == 0:
		return -1
	}
	for i := 0; i < len(v.Pre) && i < len(w.Pre); i++ {
		a, aErr := strconv.Atoi(v.Pre[i])
		b, bErr := strconv.Atoi(w.Pre[i])
		switch {
		case aErr == nil && bErr == nil && a != b:
			return sign(a - b)
		case aErr == nil && bErr != nil:
			return -1 // numeric identifiers come first
		case aErr != nil && bErr == nil:
			return 1
		case v.Pre[i] != w.Pre[i]:
			return strings.Compare(v.Pre[i], w.Pre[i])
		}
	}
	return sign(len(v.Pre) - len(w.Pre))
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// Newer returns the tags that are versions above the version rev, oldest
// first; prereleases only when rev is one. It is nil when rev is not a
// version (a branch, a commit).
func Newer(rev string, tags []string) []string {
	cur, ok := ParseVersion(rev)
	if !ok {
		return nil
	}
	var newer []Version
	for _, t := range tags {
		if v, ok := ParseVersion(t); ok && v.Compare(cur) > 0 && (len(v.Pre) == 0 || len(cur.Pre) > 0) {
			newer = append(newer, v)
		}
	}
	sort.Slice(newer, func(i, j int) bool {
		if c := newer[i].Compare(newer[j]); c != 0 {
			return c < 0
		}
		return newer[i].Tag < newer[j].Tag
	})
	out := make([]string, len(newer))
	for i, v := range newer {
		out[i] = v.Tag
	}
	return out
}
