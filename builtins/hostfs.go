package builtins

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/blaiseagent/blaise-agent/hosts"
	"go.starlark.net/starlark"
)

func (f *hostFS) Attr(name string) (starlark.Value, error) {
	m, ok := fsMethods[name]
	if !ok {
		return nil, nil // Starlark reports it, with a hint
	}
	fn := "fs." + name
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return m(f, thread, fn, args, kwargs)
	}).BindReceiver(f), nil
}

// do runs call on the host's file system with the session lock released;
// an error names the call as the plug made it: "fs.read_file: x: no such
// file or directory".
func (f *hostFS) do(thread *starlark.Thread, fn string, call func(context.Context, hosts.FS) error) error {
	ctx := Context(thread)
	var err error
	Blocking(thread, func() { err = call(ctx, f.host.h.FS()) })
	if err == nil {
		return nil
	}
	// Host errors read "read_file x: reason"; drop the repeated op name.
	msg := err.Error()
	msg = strings.TrimPrefix(msg, strings.TrimPrefix(fn, "fs.")+" ")
	return &hostError{msg: fn + ": " + msg, err: err}
}

func (f *hostFS) readFile(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	var data []byte
	err := f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		data, err = hfs.ReadFile(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return starlark.String(data), nil
}

func (f *hostFS) writeFile(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var dataV starlark.Value
	mode := 0o644
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path, "data", &dataV, "mode?", &mode); err != nil {
		return nil, err
	}
	data, ok := stringOrBytes(dataV)
	if !ok {
		return nil, fmt.Errorf("%s: data: want string or bytes, got %s", fn, dataV.Type())
	}
	perm, err := fileMode(fn, mode)
	if err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.WriteFile(ctx, path, []byte(data), perm)
	})
}

func (f *hostFS) mkdir(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var recursive bool
	mode := 0o755
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path, "recursive?", &recursive, "mode?", &mode); err != nil {
		return nil, err
	}
	perm, err := fileMode(fn, mode)
	if err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.Mkdir(ctx, path, perm, recursive)
	})
}

func (f *hostFS) readdir(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	var ents []hosts.DirEntry
	err := f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		ents, err = hfs.ReadDir(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	names := make([]starlark.Value, len(ents))
	for i, e := range ents {
		names[i] = starlark.String(e.Name)
	}
	return starlark.NewList(names), nil
}

func (f *hostFS) stat(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return f.statCall(thread, fn, args, kwargs, hosts.FS.Stat)
}

func (f *hostFS) lstat(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return f.statCall(thread, fn, args, kwargs, hosts.FS.Lstat)
}

func (f *hostFS) statCall(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple,
	call func(hosts.FS, context.Context, string) (hosts.FileInfo, error)) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	var fi hosts.FileInfo
	err := f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		fi, err = call(hfs, ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return newHostRecord("file_info",
		hostField{"name", starlark.String(fi.Name)},
		hostField{"size", starlark.MakeInt64(fi.Size)},
		hostField{"mode", starlark.MakeInt(unixMode(fi.Mode))},
		hostField{"mtime", starlark.Float(float64(fi.ModTime.UnixNano()) / 1e9)},
		hostField{"is_dir", starlark.Bool(fi.IsDir)},
		hostField{"is_file", starlark.Bool(fi.Mode.IsRegular())},
		hostField{"is_symlink", starlark.Bool(fi.IsSymlink)},
	), nil
}

func (f *hostFS) exists(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	var ok bool
	err := f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		ok, err = hfs.Exists(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return starlark.Bool(ok), nil
}

func (f *hostFS) rm(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var recursive, force bool
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path, "recursive?", &recursive, "force?", &force); err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.Remove(ctx, path, recursive, force)
	})
}

func (f *hostFS) rename(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, dst string
	if err := starlark.UnpackArgs(fn, args, kwargs, "src", &src, "dst", &dst); err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.Rename(ctx, src, dst)
	})
}

func (f *hostFS) mkdtemp(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var prefix string
	var dirV starlark.Value = starlark.None
	if err := starlark.UnpackArgs(fn, args, kwargs, "prefix", &prefix, "dir?", &dirV); err != nil {
		return nil, err
	}
	dir, err := argOptString(fn, "dir", dirV)
	if err != nil {
		return nil, err
	}
	counted := thread.Local(countTempNamesKey) != nil
	var path string
	err = f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		if counted {
			path, err = countedTemp(ctx, hfs, dir, prefix)
		} else {
			path, err = hfs.MkdirTemp(ctx, dir, prefix)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return starlark.String(path), nil
}

func (f *hostFS) symlink(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var target, path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "target", &target, "path", &path); err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.Symlink(ctx, target, path)
	})
}

func (f *hostFS) readlink(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	var target string
	err := f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) (err error) {
		target, err = hfs.Readlink(ctx, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return starlark.String(target), nil
}

func (f *hostFS) chmod(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var mode int
	if err := starlark.UnpackArgs(fn, args, kwargs, "path", &path, "mode", &mode); err != nil {
		return nil, err
	}
	perm, err := fileMode(fn, mode)
	if err != nil {
		return nil, err
	}
	return starlark.None, f.do(thread, fn, func(ctx context.Context, hfs hosts.FS) error {
		return hfs.Chmod(ctx, path, perm)
	})
}

// fileMode turns a Unix mode such as 0o755 or 0o4755 into an fs.FileMode.
func fileMode(fn string, mode int) (fs.FileMode, error) {
	if mode < 0 || mode > 0o7777 {
		return 0, fmt.Errorf("%s: mode: want 0 to 0o7777, got %#o", fn, mode)
	}
	m := fs.FileMode(mode) & fs.ModePerm
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// unixMode is the inverse of fileMode: permission and special bits only.
func unixMode(m fs.FileMode) int {
	u := int(m & fs.ModePerm)
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}
