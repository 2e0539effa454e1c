// Package engine is the control plane: the lifecycle engine of sessions
// (stop directives, reports, timers) over a store (lifecycle.Store: the file
// store, filestore, or a SQL store), and the front end's side of the
// protocol with session processes. It imports no Starlark: the words of the
// lifecycle are package lifecycle's.
package engine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// workDir is where the session's runs run, so that its plugs' relative
// paths name the same files in every run: the working directory of its
// first run (the configuration's directory for a record without one).
func workDir(r *lifecycle.Record) (string, error) {
	dir := r.Dir
	if dir == "" {
		dir = filepath.Dir(r.Config)
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("session %s: the directory it runs in: %w", r.ID, err)
	}
	return dir, nil
}
