// Package findconfig finds the configuration a command runs when it is
// not named: the nearest blaise.star in the working directory or one of its
// parents, as git finds .git.
package findconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Name is the file name of a configuration.
const Name = "blaise.star"

// Env names a configuration when -c does not.
const Env = "BLAISE_CONFIG"

// Nearest returns the absolute path of the nearest file called Name in dir
// or a parent of dir. The error says where it looked.
func Nearest(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", Name, err)
	}
	for d := dir; ; {
		p := filepath.Join(d, Name)
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return p, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("finding %s: %w", Name, err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", fmt.Errorf("no configuration: there is no %s in %s or any directory above it, and $%s is not set; name one with -c FILE",
		Name, dir, Env)
}
