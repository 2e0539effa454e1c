package main

import (
	"os"

	"github.com/alecthomas/kong"

	"github.com/blaiseagent/blaise-agent/internal/findconfig"
)

// ConfigFlag is -c of the commands that run a configuration.
type ConfigFlag struct {
	Config string `short:"c" help:"The configuration file (default: the nearest blaise.star in the working directory or a parent)." type:"path" env:"BLAISE_CONFIG" predictor:"star" placeholder:"FILE"`
}

// AfterApply finds the configuration -c and $BLAISE_CONFIG leave unnamed. A
// command given --session needs none: the session names its own.
func (f *ConfigFlag) AfterApply(kctx *kong.Context) error {
	if f.Config != "" || sessionNamed(kctx) {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	f.Config, err = findconfig.Nearest(wd)
	return err
}

// sessionNamed reports whether the command line names a session with
// --session.
func sessionNamed(kctx *kong.Context) bool {
	for _, fl := range kctx.Flags() {
		if fl.Name == "session" {
			s, _ := kctx.FlagValue(fl).(string)
			return s != ""
		}
	}
	return false
}
