//go:build unix

package hosts

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// localFS is the real file system as Local.FS returns it. Errors are
// *fs.PathError values whose Op is the call's name as plugs see it
// ("read_file"), whose Path is the path as given, and whose Err is the OS's
// reason, so they read "read_file x/y: no such file or directory" and
// match fs.ErrNotExist and the like with errors.Is.
type localFS struct{ h *Local }

var _ FS = (*localFS)(nil)

// Default permissions when a call passes 0.
const (
	defaultFilePerm fs.FileMode = 0o644
	defaultDirPerm  fs.FileMode = 0o755
)

// pathErr makes the error of op on name from an os error.
func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: reason(err)}
}

// begin checks that a call can run and resolves name.
func (f *localFS) begin(ctx context.Context, op, name string) (string, error) {
	if err := f.h.check(ctx); err != nil {
		return "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	if name == "" {
		return "", &fs.PathError{Op: op, Path: `""`, Err: errors.New("empty path")}
	}
	return f.h.resolve(name), nil
}

func (f *localFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	p, err := f.begin(ctx, "read_file", name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, pathErr("read_file", name, err)
	}
	return b, nil
}

// WriteFile creates or truncates name; perm (default 0o644) applies when it
// creates the file.
func (f *localFS) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	p, err := f.begin(ctx, "write_file", name)
	if err != nil {
		return err
	}
	if perm == 0 {
		perm = defaultFilePerm
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		return pathErr("write_file", name, err)
	}
	return nil
}

// Mkdir creates a directory (perm default 0o755). Recursive, it creates
// the parents too and does not fail if the directory exists, like mkdir -p.
func (f *localFS) Mkdir(ctx context.Context, name string, perm fs.FileMode, recursive bool) error {
	p, err := f.begin(ctx, "mkdir", name)
	if err != nil {
		return err
	}
	if perm == 0 {
		perm = defaultDirPerm
	}
	if recursive {
		err = os.MkdirAll(p, perm)
	} else {
		err = os.Mkdir(p, perm)
	}
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	return nil
}

// ReadDir lists a directory, sorted by name.
func (f *localFS) ReadDir(ctx context.Context, name string) ([]DirEntry, error) {
	p, err := f.begin(ctx, "readdir", name)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]DirEntry, len(ents))
	for i, e := range ents {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, nil
}

func (f *localFS) Stat(ctx context.Context, name string) (FileInfo, error) {
	return f.stat(ctx, "stat", name, os.Stat)
}

func (f *localFS) Lstat(ctx context.Context, name string) (FileInfo, error) {
	return f.stat(ctx, "lstat", name, os.Lstat)
}

func (f *localFS) stat(ctx context.Context, op, name string, statFn func(string) (fs.FileInfo, error)) (FileInfo, error) {
	p, err := f.begin(ctx, op, name)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := statFn(p)
	if err != nil {
		return FileInfo{}, pathErr(op, name, err)
	}
	return FileInfo{
		Name:      fi.Name(),
		Size:      fi.Size(),
		Mode:      fi.Mode(),
		ModTime:   fi.ModTime(),
		IsDir:     fi.IsDir(),
		IsSymlink: fi.Mode()&fs.ModeSymlink != 0,
	}, nil
}

// Exists reports whether name exists, following symlinks: a dangling
// symlink does not exist.
func (f *localFS) Exists(ctx context.Context, name string) (bool, error) {
	p, err := f.begin(ctx, "exists", name)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	}
	return false, pathErr("exists", name, err)
}

// Remove removes name like rm: a directory only when recursive (rm -r),
// and a missing name is an error unless force (rm -f).
func (f *localFS) Remove(ctx context.Context, name string, recursive, force bool) error {
	p, err := f.begin(ctx, "rm", name)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if force && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
			return nil
		}
		return pathErr("rm", name, err)
	}
	if fi.IsDir() && !recursive {
		return pathErr("rm", name, syscall.EISDIR)
	}
	if recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		return pathErr("rm", name, err)
	}
	return nil
}

// Rename moves from to to, replacing to if it is a file.
func (f *localFS) Rename(ctx context.Context, from, to string) error {
	both := from + " -> " + to
	p, err := f.begin(ctx, "rename", from)
	if err != nil {
		return err
	}
	q, err := f.begin(ctx, "rename", to)
	if err != nil {
		return err
	}
	if err := os.Rename(p, q); err != nil {
		return pathErr("rename", both, err)
	}
	return nil
}

// MkdirTemp creates a new directory whose name starts with prefix and
// returns its path. A prefix with a slash is a path, as in Node's mkdtemp
// (relative to dir if given, else to the workspace); otherwise the
// directory is created in dir, by default the system's temporary
// directory.
func (f *localFS) MkdirTemp(ctx context.Context, dir, prefix string) (string, error) {
	if err := f.h.check(ctx); err != nil {
		return "", &fs.PathError{Op: "mkdtemp", Path: filepath.Join(dir, prefix), Err: err}
	}
	if strings.Contains(prefix, "/") {
		d, base := filepath.Split(prefix)
		if dir != "" && !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		dir, prefix = d, base
	}
	switch {
	case dir == "":
		dir = os.TempDir()
	case !filepath.IsAbs(dir):
		dir = f.h.resolve(dir)
	}
	p, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", pathErr("mkdtemp", filepath.Join(dir, prefix), err)
	}
	return p, nil
}

// Symlink creates name as a symbolic link to target; target is stored as
// given.
func (f *localFS) Symlink(ctx context.Context, target, name string) error {
	p, err := f.begin(ctx, "symlink", name)
	if err != nil {
		return err
	}
	if err := os.Symlink(target, p); err != nil {
		return pathErr("symlink", name, err)
	}
	return nil
}

func (f *localFS) Readlink(ctx context.Context, name string) (string, error) {
	p, err := f.begin(ctx, "readlink", name)
	if err != nil {
		return "", err
	}
	t, err := os.Readlink(p)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	return t, nil
}

func (f *localFS) Chmod(ctx context.Context, name string, perm fs.FileMode) error {
	p, err := f.begin(ctx, "chmod", name)
	if err != nil {
		return err
	}
	if err := os.Chmod(p, perm); err != nil {
		return pathErr("chmod", name, err)
	}
	return nil
}
