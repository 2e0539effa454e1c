package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestVersionFromBuildInfo: the version is the module version and VCS
// revision the build recorded, not a placeholder; a build that recorded
// neither names its toolchain and platform.
func TestVersionFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0"},
		{"work tree", debug.BuildInfo{Main: debug.Module{Version: "v1.2.1-0.20261130080000-a1b2c3d4e5f6+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"},
			{Key: "vcs.time", Value: "2026-11-30T08:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, "v1.2.1-0.20261130080000-a1b2c3d4e5f6+dirty (a1b2c3d4e5f6, 2026-11-30T08:00:00Z, modified)"},
		{"no version recorded", debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "(devel) (abc)"},
		{"go run", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}},
			"(devel) go1.26.8 linux/amd64"},
		{"test binary", debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel) go1.26.8 linux/amd64"},
	} {
		if got := describe(&tc.info, "linux/amd64"); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
