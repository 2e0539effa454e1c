package builtins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"github.com/blaiseagent/blaise-agent/interp"
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
	interp.Inert // immutable
	interp.Unhashable[*Host]

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

func (v *Host) String() string { return fmt.Sprintf("<host %s>", v.name) }
func (v *Host) Type() string   { return "host" }

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
type hostFS struct {
	interp.Inert // immutable
	interp.Unhashable[*hostFS]
	host *Host
}

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

func (f *hostFS) String() string      { return fmt.Sprintf("<fs of host %s>", f.host.name) }
func (f *hostFS) Type() string        { return "fs" }
func (f *hostFS) AttrNames() []string { return fsMethodNames }

// shellJoin renders argv as a POSIX shell command line, for messages and
// for the remote command of hosts.ssh.
var shellJoin = hostd.ShellJoin

// hostRecord is an immutable Starlark value with named fields and a type
// name of its own: host_info, exec_result, file_info.
type hostRecord struct {
	interp.Inert // frozen when made

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

func (r *hostRecord) Type() string        { return r.typ }
func (r *hostRecord) AttrNames() []string { return r.names }

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
