package interp

import (
	"errors"
	"os"
	"path/filepath"
)

// ErrNotAPlug is the cause of the error of loading, as a plug, a file that
// never calls plug(): a module for load(), or a configuration.
var ErrNotAPlug = errors.New("not a plug")

// LoadPlug loads the plug that ref names, as use() in a configuration of
// the working directory would: blaise:NAME, or a path.
func (l *Loader) LoadPlug(ref string) (*Plug, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	l.lockDir = wd
	key, err := l.resolve(ref, filepath.Join(wd, "blaise.star"))
	if err != nil {
		return nil, err
	}
	p, err := l.loadPlug(key)
	if err == nil {
		err = l.checkRemote(ref, key)
	}
	return p, err
}
