package main

import (
	"os"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/blaiseagent/blaise-agent/internal/plugs/gitcache"
	"github.com/blaiseagent/blaise-agent/internal/support/findconfig"
)

// ConfigFlag is -c of the commands that run a configuration.
type ConfigFlag struct {
	Config  string `short:"c" help:"The configuration file (default: the nearest blaise.star in the working directory or a parent)." type:"path" env:"BLAISE_CONFIG" predictor:"star" placeholder:"FILE"`
	Offline bool   `help:"Never fetch plugs of git repositories: use only blaise.lock and the cache, and fail when they lack something." env:"BLAISE_OFFLINE"`
}

// AfterApply finds the configuration -c and $BLAISE_CONFIG leave unnamed. A
// command given --session needs none: the session names its own; nor one
// given --server, but listen: the server's runners have theirs.
func (f *ConfigFlag) AfterApply(kctx *kong.Context) error {
	if f.Offline {
		// In the environment, session processes started later see it too.
		os.Setenv(gitcache.EnvOffline, "1")
	}
	remote := flagSet(kctx, "server") && !strings.HasPrefix(kctx.Command(), "listen")
	if f.Config != "" || flagSet(kctx, "session") || remote {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	f.Config, err = findconfig.Nearest(wd)
	return err
}

// flagSet reports whether the command line gives the string flag name.
func flagSet(kctx *kong.Context, name string) bool {
	for _, fl := range kctx.Flags() {
		if fl.Name == name {
			s, _ := kctx.FlagValue(fl).(string)
			return s != ""
		}
	}
	return false
}
