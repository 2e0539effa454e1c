// Package buildinfo says which build of blaise-agent is running, from what
// the Go toolchain recorded in the binary (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the module version of the running binary and, when the build
// recorded it, its VCS revision: "v1.2.0 (a1b2c3d4e5f6, 2026-11-30T08:00:00Z)",
// with ", modified" for a build from a work tree with local changes. A
// build that recorded neither (go run, -buildvcs=false) is "(devel)" with
// the toolchain and platform it was built for: "(devel) go1.26.8 linux/amd64".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: the binary holds no build information)"
	}
	return describe(info, runtime.GOOS+"/"+runtime.GOARCH)
}

// describe formats the version of a build made for platform.
func describe(info *debug.BuildInfo, platform string) string {
	version := info.Main.Version
	if version == "" {
		version = "(devel)" // test binaries record none
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if version != "(devel)" {
			return version
		}
		// Nothing names the source (go run, -buildvcs=false): what is
		// known of the build is.
		return strings.Join(strings.Fields(version+" "+info.GoVersion+" "+platform), " ")
	}
	details := []string{rev[:min(len(rev), 12)]}
	if at != "" {
		details = append(details, at)
	}
	if modified {
		details = append(details, "modified")
	}
	return version + " (" + strings.Join(details, ", ") + ")"
}
