package chain

import (
	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/internal/plugs/pluglock"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/stdlib"
	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"
)

// NewLoader returns a loader with the standard library and the builtins
// every plug sees, and BLAISE_AGENT, the path of this program.
func NewLoader(logger *log.Logger) *interp.Loader {
	return newLoader(logger, pluglock.NewResolver(pluglock.Locked))
}

func newLoader(logger *log.Logger, remote *pluglock.Resolver) *interp.Loader {
	predeclared := starlark.StringDict{}
	for k, v := range builtins.Predeclared {
		predeclared[k] = v
	}
	if self, err := Self(); err == nil {
		predeclared["BLAISE_AGENT"] = starlark.String(self)
	}
	if remote.Warn == nil {
		remote.Warn = func(msg string) { logger.Warn(msg) }
	}
	return &interp.Loader{
		Stdlib:      stdlib.FS,
		Predeclared: predeclared,
		Remote:      remote,
		Print: func(file, msg string) {
			logger.WithPrefix(file).Info(msg)
		},
	}
}

// LoadConfig loads a blaise.star and every plug it uses.
func LoadConfig(path string, logger *log.Logger) (*interp.Config, error) {
	return NewLoader(logger).LoadConfig(path)
}

// LoadConfigWith loads a blaise.star as LoadConfig does, with remote for
// its git+ references.
func LoadConfigWith(path string, logger *log.Logger, remote *pluglock.Resolver) (*interp.Config, error) {
	return newLoader(logger, remote).LoadConfig(path)
}

// LockPlugs loads the configuration at path, pinning its git+ references
// as remote's mode says, and writes blaise.lock beside it.
func LockPlugs(path string, logger *log.Logger, remote *pluglock.Resolver) ([]pluglock.Change, error) {
	cfg, err := LoadConfigWith(path, logger, remote)
	if err != nil {
		return nil, err
	}
	return remote.Write(cfg.Dir)
}
