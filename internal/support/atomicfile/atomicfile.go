// Package atomicfile replaces files so that a reader sees the old content
// or the new, never a part: the data goes to a temporary file in the same
// directory, named ".<name>.tmp-<random>", which is renamed over the file.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces name with data, with permissions perm. With durable, the
// data and then the directory entry are synced, so the new content survives
// a crash once Write returns. On failure the temporary file is removed and
// name is as it was.
func Write(name string, data []byte, perm fs.FileMode, durable bool) (err error) {
	dir, base := filepath.Split(name)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(f.Name(), name); err != nil {
		return err
	}
	if durable {
		return SyncDir(dir)
	}
	return nil
}

// SyncDir syncs a directory, making the entries created, renamed or removed
// in it durable.
func SyncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
