package interp

import (
	"os"
	"path/filepath"

	"go.starlark.net/starlark"
)

// LoadModule loads the helper module at path, as load() would: for editors,
// which check a module on its own.
func (l *Loader) LoadModule(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	// Checked alone, a module pins git+ references by the working
	// directory's lock, as a plug does in LoadPlug.
	if l.lockDir, err = os.Getwd(); err != nil {
		return err
	}
	_, err = l.load(abs, helperFile, l.withPlug(), nil)
	return err
}

// FilePredeclared returns the names every plug file and module sees: the
// loader's Predeclared and the interpreter's own (schema, struct, json,
// plug …). A configuration sees agent, setup, use and session besides.
func (l *Loader) FilePredeclared() starlark.StringDict {
	all := l.withPlug()
	for k, v := range commonPredeclared {
		all[k] = v
	}
	return all
}
