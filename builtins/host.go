package builtins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// infoTimeout bounds the fetching of host.info, which, being an attribute,
// cannot use the thread's context.
const infoTimeout = 30 * time.Second

// Host is the Starlark value of a hosts.Host (type "host"): ctx.host,
// ctx.runner and hosts that plugs make. Its attributes are info, exec,
// spawn, fs and, where the host can, forward.
type Host struct {
	h    hosts.Host
	name string
	fs   *hostFS

	// lock, when set, is the session lock, released while host.info is
	// fetched from a host that may be far away.
	lock *Lock

	mu   sync.Mutex
	info *hostRecord // cached once fetched
}

var _ starlark.HasAttrs = (*Host)(nil)

// NewHost returns the Starlark value of h; name identifies it in messages
// ("local", "runner", a plug's name for its host …).
func NewHost(h hosts.Host, name string) starlark.Value {
	v := &Host{h: h, name: name}
	v.fs = &hostFS{host: v}
	return v
}

// Unwrap returns the host that v wraps.
func (v *Host) Unwrap() hosts.Host { return v.h }

// Name returns the name v was made with.
func (v *Host) Name() string { return v.name }

func (v *Host) String() string        { return fmt.Sprintf("<host %s>", v.name) }
func (v *Host) Type() string          { return "host" }
func (v *Host) Freeze()               {} // immutable
func (v *Host) Truth() starlark.Bool  { return true }
func (v *Host) Hash() (uint32, error) { return 0, errors.New("unhashable type: host") }

func (v *Host) AttrNames() []string {
	if _, ok := v.h.(hosts.Forwarder); ok {
		return []string{"exec", "forward", "fs", "info", "spawn"}
	}
	return []string{"exec", "fs", "info", "spawn"}
}

func (v *Host) Attr(name string) (starlark.Value, error) {
	switch name {
	case "info":
		return v.infoValue()
	case "fs":
		return v.fs, nil
	case "exec":
		return starlark.NewBuiltin("exec", v.exec).BindReceiver(v), nil
	case "spawn":
		return starlark.NewBuiltin("spawn", v.spawn).BindReceiver(v), nil
	case "forward":
		fw, ok := v.h.(hosts.Forwarder)
		if !ok {
			return nil, fmt.Errorf("host %s cannot forward ports", v.name)
		}
		return starlark.NewBuiltin("forward", v.forward(fw)).BindReceiver(v), nil
	}
	return nil, nil // Starlark reports it, with a hint
}

// infoValue fetches host.info once; a failure is not cached. An
// attribute has no thread, so the session lock, if the value knows it, is
// released directly (the code reading the attribute holds it).
func (v *Host) infoValue() (starlark.Value, error) {
	v.mu.Lock()
	cached := v.info
	v.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	var info hosts.Info
	var err error
	if v.lock != nil {
		v.lock.Release()
		info, err = v.h.Info(ctx)
		v.lock.Acquire()
	} else {
		info, err = v.h.Info(ctx)
	}
	if err != nil {
		if he := (*hostd.HostError)(nil); errors.As(err, &he) && he.Host == v.name {
			return nil, fmt.Errorf("host.info: %w", err) // the host named itself
		}
		return nil, fmt.Errorf("host %s: info: %w", v.name, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.info = newHostRecord("host_info",
		hostField{"kind", starlark.String(info.Kind)},
		hostField{"os", starlark.String(info.OS)},
		hostField{"home", starlark.String(info.Home)},
		hostField{"tmpdir", starlark.String(info.Tmpdir)},
		hostField{"workspace", starlark.String(info.Workspace)},
		hostField{"persistent", starlark.Bool(info.Persistent)},
	)
	return v.info, nil
}

// exec implements host.exec(argv, cwd=None, env=None, stdin=None,
// timeout=None, check=False, on_stdout=None).
func (v *Host) exec(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "exec"
	var argvV, cwdV, envV, stdinV, timeoutV starlark.Value = nil, starlark.None, starlark.None, starlark.None, starlark.None
	var check bool
	var onStdout starlark.Callable
	if err := starlark.UnpackArgs(fn, args, kwargs,
		"argv", &argvV, "cwd?", &cwdV, "env?", &envV, "stdin?", &stdinV, "timeout?", &timeoutV, "check?", &check, "on_stdout?", &onStdout); err != nil {
		return nil, err
	}
	argv, err := argStrings(fn, "argv", argvV)
	if err != nil {
		return nil, err
	}
	opts := hosts.ExecOptions{}
	if opts.Dir, err = argOptString(fn, "cwd", cwdV); err != nil {
		return nil, err
	}
	if opts.Env, err = argEnv(fn, envV); err != nil {
		return nil, err
	}
	if stdinV != starlark.None {
		s, ok := stringOrBytes(stdinV)
		if !ok {
			return nil, fmt.Errorf("%s: stdin: want string or bytes, got %s", fn, stdinV.Type())
		}
		opts.Stdin = []byte(s)
	}
	if opts.Timeout, err = argTimeout(fn, timeoutV); err != nil {
		return nil, err
	}

	var res hosts.ExecResult
	if onStdout == nil {
		ctx := Context(thread)
		Blocking(thread, func() { res, err = v.h.Exec(ctx, argv, opts) })
	} else {
		res, err = v.execLines(thread, argv, opts, onStdout)
	}
	if err != nil {
		return nil, prefixErr(fn, err)
	}
	if check {
		switch {
		case res.TimedOut:
			return nil, fmt.Errorf("%s %s: timed out after %v%s", fn, shellJoin(argv), opts.Timeout, stderrTail(res.Stderr))
		case res.Code != 0:
			return nil, fmt.Errorf("%s %s: exit code %d%s", fn, shellJoin(argv), res.Code, stderrTail(res.Stderr))
		}
	}
	return newHostRecord("exec_result",
		hostField{"code", starlark.MakeInt(res.Code)},
		hostField{"stdout", starlark.String(res.Stdout)},
		hostField{"stderr", starlark.String(res.Stderr)},
		hostField{"timed_out", starlark.Bool(res.TimedOut)},
	), nil
}

// execLines runs host.exec(..., on_stdout=f): f is called on the thread
// with each line of stdout as it comes, or, on a host that cannot stream
// it, once the command ended. When f fails, the command is killed.
func (v *Host) execLines(thread *starlark.Thread, argv []string, opts hosts.ExecOptions, f starlark.Callable) (hosts.ExecResult, error) {
	ctx, cancel := context.WithCancel(Context(thread))
	defer cancel()
	lines := make(chan string)
	feed := &lineFeed{ch: lines, stop: ctx.Done()}
	opts.Stdout = feed
	var res hosts.ExecResult
	var err error
	// Waited for: the loop below reads lines until it closes them.
	go func() {
		defer close(lines)
		res, err = v.h.Exec(ctx, argv, opts)
		if feed.n < len(res.Stdout) {
			feed.Write(res.Stdout[feed.n:])
		}
		feed.end()
	}()
	for {
		var line string
		var ok bool
		Blocking(thread, func() { line, ok = <-lines })
		if !ok {
			return res, err
		}
		if _, ferr := starlark.Call(thread, f, starlark.Tuple{starlark.String(line)}, nil); ferr != nil {
			cancel()
			Blocking(thread, func() {
				for range lines {
				}
			})
			return res, fmt.Errorf("on_stdout: %w", ferr)
		}
	}
}

// lineFeed sends the lines written to it, without their newlines, until
// stop is closed; n counts the bytes written.
type lineFeed struct {
	ch      chan<- string
	stop    <-chan struct{}
	partial []byte
	n       int
}

func (f *lineFeed) Write(b []byte) (int, error) {
	f.n += len(b)
	f.partial = append(f.partial, b...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if !f.send(string(f.partial[:i])) {
			return 0, context.Canceled
		}
		f.partial = f.partial[i+1:]
	}
}

// end sends a last line that has no newline.
func (f *lineFeed) end() {
	if len(f.partial) > 0 {
		f.send(string(f.partial))
		f.partial = nil
	}
}

func (f *lineFeed) send(line string) bool {
	select {
	case f.ch <- line:
		return true
	case <-f.stop:
		return false
	}
}

// spawn implements host.spawn(argv, cwd=None, env=None).
func (v *Host) spawn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "spawn"
	var argvV, cwdV, envV starlark.Value = nil, starlark.None, starlark.None
	if err := starlark.UnpackArgs(fn, args, kwargs, "argv", &argvV, "cwd?", &cwdV, "env?", &envV); err != nil {
		return nil, err
	}
	argv, err := argStrings(fn, "argv", argvV)
	if err != nil {
		return nil, err
	}
	spec := hosts.SpawnSpec{Argv: argv}
	if spec.Dir, err = argOptString(fn, "cwd", cwdV); err != nil {
		return nil, err
	}
	if spec.Env, err = argEnv(fn, envV); err != nil {
		return nil, err
	}
	ctx := Context(thread)
	var p hosts.Process
	Blocking(thread, func() { p, err = v.h.Spawn(ctx, spec) })
	if err != nil {
		return nil, prefixErr(fn, err)
	}
	return newProcess(p, argv), nil
}

// forward implements host.forward(remote, local="127.0.0.1:0"): a port
// on the runner reaching remote as the host sees it. It returns a record
// with the address listened on and close(); the forward ends with close()
// or when the host is closed.
func (v *Host) forward(fw hosts.Forwarder) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		const fn = "forward"
		spec := hosts.ForwardSpec{LocalAddr: "127.0.0.1:0"}
		if err := starlark.UnpackArgs(fn, args, kwargs, "remote", &spec.RemoteAddr, "local?", &spec.LocalAddr); err != nil {
			return nil, err
		}
		ctx := Context(thread)
		var addr string
		var closer io.Closer
		var err error
		Blocking(thread, func() { addr, closer, err = fw.Forward(ctx, spec) })
		if err != nil {
			return nil, prefixErr(fn, err)
		}
		closeFn := starlark.NewBuiltin("close", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			if err := closer.Close(); err != nil {
				return nil, fmt.Errorf("forward %s: close: %w", addr, err)
			}
			return starlark.None, nil
		})
		return newHostRecord("forward",
			hostField{"address", starlark.String(addr)},
			hostField{"remote", starlark.String(spec.RemoteAddr)},
			hostField{"close", closeFn},
		), nil
	}
}

// hostFS is host.fs (type "fs"): the host's file system with Node's fs
// call names in snake_case.
type hostFS struct{ host *Host }

var _ starlark.HasAttrs = (*hostFS)(nil)

// fsMethods are the methods of host.fs by name.
var fsMethods = map[string]func(*hostFS, *starlark.Thread, string, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
	"chmod":      (*hostFS).chmod,
	"exists":     (*hostFS).exists,
	"lstat":      (*hostFS).lstat,
	"mkdir":      (*hostFS).mkdir,
	"mkdtemp":    (*hostFS).mkdtemp,
	"read_file":  (*hostFS).readFile,
	"readdir":    (*hostFS).readdir,
	"readlink":   (*hostFS).readlink,
	"rename":     (*hostFS).rename,
	"rm":         (*hostFS).rm,
	"stat":       (*hostFS).stat,
	"symlink":    (*hostFS).symlink,
	"write_file": (*hostFS).writeFile,
}

var fsMethodNames = []string{"chmod", "exists", "lstat", "mkdir", "mkdtemp", "read_file", "readdir", "readlink", "rename", "rm", "stat", "symlink", "write_file"}

func (f *hostFS) String() string        { return fmt.Sprintf("<fs of host %s>", f.host.name) }
func (f *hostFS) Type() string          { return "fs" }
func (f *hostFS) Freeze()               {} // immutable
func (f *hostFS) Truth() starlark.Bool  { return true }
func (f *hostFS) Hash() (uint32, error) { return 0, errors.New("unhashable type: fs") }
func (f *hostFS) AttrNames() []string   { return fsMethodNames }

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

// stringOrBytes returns the contents of a string or bytes value.
func stringOrBytes(v starlark.Value) (string, bool) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), true
	case starlark.Bytes:
		return string(v), true
	}
	return "", false
}

// argStrings converts a list or tuple of strings.
func argStrings(fn, param string, v starlark.Value) ([]string, error) {
	var seq starlark.Indexable
	switch v := v.(type) {
	case *starlark.List:
		seq = v
	case starlark.Tuple:
		seq = v
	default:
		return nil, fmt.Errorf("%s: %s: want list of strings, got %s", fn, param, v.Type())
	}
	if seq.Len() == 0 {
		return nil, fmt.Errorf("%s: %s: must not be empty", fn, param)
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, ok := seq.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: %s[%d]: want string, got %s", fn, param, i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	return out, nil
}

// argOptString converts a string or None ("").
func argOptString(fn, param string, v starlark.Value) (string, error) {
	if v == starlark.None {
		return "", nil
	}
	s, ok := v.(starlark.String)
	if !ok {
		return "", fmt.Errorf("%s: %s: want string or None, got %s", fn, param, v.Type())
	}
	return string(s), nil
}

// argEnv converts a dict of strings to strings, or None (nil).
func argEnv(fn string, v starlark.Value) (map[string]string, error) {
	if v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("%s: env: want dict of strings, got %s", fn, v.Type())
	}
	env := make(map[string]string, d.Len())
	for k, val := range d.Entries() {
		ks, ok := k.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: env: want string keys, got %s", fn, k.Type())
		}
		vs, ok := val.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: env[%s]: want string, got %s", fn, ks, val.Type())
		}
		env[string(ks)] = string(vs)
	}
	return env, nil
}

// argTimeout converts seconds (int or float) or None (0).
func argTimeout(fn string, v starlark.Value) (time.Duration, error) {
	var secs float64
	switch v := v.(type) {
	case starlark.NoneType:
		return 0, nil
	case starlark.Int:
		secs = float64(v.Float())
	case starlark.Float:
		secs = float64(v)
	default:
		return 0, fmt.Errorf("%s: timeout: want seconds as int or float, got %s", fn, v.Type())
	}
	if !(secs > 0) || math.IsInf(secs, 0) || secs > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("%s: timeout: want a positive number of seconds, got %v", fn, v)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// hostError is an error of a host call as the plug sees it; it keeps the
// host's error for errors.Is.
type hostError struct {
	msg string
	err error
}

func (e *hostError) Error() string { return e.msg }
func (e *hostError) Unwrap() error { return e.err }

// prefixErr names the call fn in err unless the host already did
// (`exec "x": …`).
func prefixErr(fn string, err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, fn+" ") || strings.HasPrefix(msg, fn+":") {
		return err
	}
	return &hostError{msg: fn + ": " + msg, err: err}
}

// stderrTailLines is how many of the last lines of stderr a failed checked
// exec reports.
const stderrTailLines = 10

// stderrTail formats the last lines of stderr for an error message, or ""
// if there are none.
func stderrTail(stderr []byte) string {
	s := strings.TrimRight(string(stderr), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > stderrTailLines {
		lines = lines[len(lines)-stderrTailLines:]
	}
	const maxLine = 500
	for i, l := range lines {
		if len(l) > maxLine {
			lines[i] = l[:maxLine] + "…"
		}
	}
	return "; stderr:\n  " + strings.Join(lines, "\n  ")
}

// shellJoin renders argv as a POSIX shell command line, for messages and
// for the remote command of hosts.ssh.
var shellJoin = hostd.ShellJoin

// hostRecord is an immutable Starlark value with named fields and a type
// name of its own: host_info, exec_result, file_info.
type hostRecord struct {
	typ    string
	names  []string // in the order given
	fields starlark.StringDict
}

// hostField is one field of a hostRecord.
type hostField struct {
	name  string
	value starlark.Value
}

// newHostRecord returns a frozen record of type typ.
func newHostRecord(typ string, fields ...hostField) *hostRecord {
	r := &hostRecord{typ: typ, fields: make(starlark.StringDict, len(fields))}
	for _, f := range fields {
		f.value.Freeze()
		r.names = append(r.names, f.name)
		r.fields[f.name] = f.value
	}
	return r
}

var (
	_ starlark.HasAttrs   = (*hostRecord)(nil)
	_ starlark.Comparable = (*hostRecord)(nil)
)

func (r *hostRecord) Type() string         { return r.typ }
func (r *hostRecord) Freeze()              {} // frozen when made
func (r *hostRecord) Truth() starlark.Bool { return true }
func (r *hostRecord) AttrNames() []string  { return r.names }

func (r *hostRecord) Attr(name string) (starlark.Value, error) {
	if v, ok := r.fields[name]; ok {
		return v, nil
	}
	return nil, nil // Starlark reports it, with a hint
}

func (r *hostRecord) Hash() (uint32, error) {
	var h uint32 = 2166136261
	for _, n := range r.names {
		fh, err := r.fields[n].Hash()
		if err != nil {
			return 0, err
		}
		h = (h ^ fh) * 16777619
	}
	return h, nil
}

func (r *hostRecord) String() string {
	var b strings.Builder
	b.WriteString(r.typ)
	b.WriteByte('(')
	for i, n := range r.names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %s", n, r.fields[n])
	}
	b.WriteByte(')')
	return b.String()
}

// CompareSameType makes records of the same type with equal fields equal.
func (r *hostRecord) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	o := y.(*hostRecord)
	switch op {
	case syntax.EQL, syntax.NEQ:
		eq := r.typ == o.typ && len(r.names) == len(o.names)
		for i := 0; eq && i < len(r.names); i++ {
			if r.names[i] != o.names[i] {
				eq = false
				break
			}
			var err error
			if eq, err = starlark.EqualDepth(r.fields[r.names[i]], o.fields[o.names[i]], depth-1); err != nil {
				return false, err
			}
		}
		return eq == (op == syntax.EQL), nil
	}
	return false, fmt.Errorf("%s %s %s not implemented", r.typ, op, o.typ)
}
