package interp

import "path/filepath"

// LoadModule loads the helper module at path, as load() would: for editors,
// which check a module on its own.
func (l *Loader) LoadModule(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	_, err = l.load(abs, helperFile, l.withPlug(), nil)
	return err
}
