package runner

import (
	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/stdlib"
	"github.com/charmbracelet/log"
)

// NewLoader returns a loader with the standard library and the builtins
// every plug sees.
func NewLoader(logger *log.Logger) *interp.Loader {
	return &interp.Loader{
		Stdlib:      stdlib.FS,
		Predeclared: builtins.Predeclared,
		Print: func(file, msg string) {
			logger.WithPrefix(file).Info(msg)
		},
	}
}

// LoadConfig loads a blaise.star and every plug it uses.
func LoadConfig(path string, logger *log.Logger) (*interp.Config, error) {
	return NewLoader(logger).LoadConfig(path)
}
