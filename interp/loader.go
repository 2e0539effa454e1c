// Package interp loads blaise.star configurations, plug files and helper
// modules, and turns them into checked definitions: which plugs, in which
// order, with which inputs and handlers.
package interp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugref"
)

// StdlibPrefix marks references to plugs and modules embedded in the binary.
const StdlibPrefix = "blaise:"

// FileOptions are the Starlark dialect of every file: while loops,
// recursion and top-level control flow are allowed; runaway code is
// stopped by step limits and cancellation instead.
var FileOptions = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	Recursion:       true,
}

// A Loader loads files by reference, each file once, and reports load
// cycles. It is not safe for concurrent use.
type Loader struct {
	// Stdlib holds the files referenced as blaise:NAME.
	Stdlib fs.FS
	// Predeclared names are added to those of plug files (plug, schema …),
	// for example request_error and hosts.
	Predeclared starlark.StringDict
	// Print receives print() output during loading; nil discards it.
	Print func(file, msg string)
	// Overlay holds sources by absolute path that replace the files on
	// disk: the unsaved documents of an editor.
	Overlay map[string][]byte
	// Remote resolves git+ references; nil refuses them.
	Remote Remote
	// Vet makes the mistakes found in the handlers' code (Plug.Mistakes),
	// which a run meets only on the paths that have them, errors of the
	// load: for check and the editor, not for a run.
	Vet bool
	// Fallback, when set, gives the files below one directory a second
	// place to find what they reference (blaise-agent test: the test's own
	// configuration, written to a temporary directory, reaches the plugs
	// beside the test file).
	Fallback *Fallback

	lockDir string // where the lock of git+ references is: the configuration's
	modules map[string]*module
	stack   []string // keys being loaded, for cycle reports
}

type fileKind int

const (
	helperFile fileKind = iota // reached by load()
	plugFile                   // reached by use()
	configFile                 // blaise.star
)

// Warnings returns the warnings of the plugs loaded so far, those of a
// configuration that did not load among them, by the plugs' files.
func (l *Loader) Warnings() []*Error {
	keys := slices.Sorted(maps.Keys(l.modules))
	var out []*Error
	for _, k := range keys {
		if m := l.modules[k]; m.plug != nil {
			out = append(out, m.plug.Warnings...)
		}
	}
	return out
}

type module struct {
	kind    fileKind
	globals starlark.StringDict
	plug    *Plug
	err     error
	sum     [32]byte // of the source, for the lock of git+ references
	deps    []string // keys it loads
	// warnings of the file and of the modules it loads, for check: the
	// comparisons with "object" read as "dict" (objectTests).
	warnings []*Error
}

// resolve turns ref, written in the file with key from, into a key: an
// absolute path or StdlibPrefix+name.
func (l *Loader) resolve(ref, from string) (string, error) {
	switch {
	case ref == "":
		return "", fmt.Errorf("empty reference")
	case plugref.IsRemote(ref):
		return l.resolveRemote(ref)
	case strings.HasPrefix(ref, StdlibPrefix):
		name := strings.TrimPrefix(ref, StdlibPrefix)
		if !strings.HasSuffix(name, ".star") {
			name += ".star"
		}
		if !fs.ValidPath(name) {
			return "", fmt.Errorf("invalid reference %q", ref)
		}
		return StdlibPrefix + name, nil
	case plugref.IsRemote(from):
		r, err := plugref.Parse(from)
		if err != nil {
			return "", err
		}
		return resolveInRemote(ref, r)
	case strings.HasPrefix(from, StdlibPrefix):
		if path.IsAbs(ref) {
			return "", fmt.Errorf("%s cannot reference the file %q", from, ref)
		}
		name := path.Join(path.Dir(strings.TrimPrefix(from, StdlibPrefix)), ref)
		if !fs.ValidPath(name) {
			return "", fmt.Errorf("invalid reference %q", ref)
		}
		return StdlibPrefix + name, nil
	case filepath.IsAbs(ref):
		return filepath.Clean(ref), nil
	default:
		return l.Fallback.resolve(l, filepath.Join(filepath.Dir(from), ref), from), nil
	}
}

// A Fallback gives the files below From a second place to find a file
// they reference: a relative reference of such a file that names no file
// is taken relative to To, as if the referencing file lay there.
type Fallback struct{ From, To string }

// resolve returns key, the file a reference of from names, or, when from
// lies below fb.From and key does not exist, the same place relative to
// fb.To.
func (fb *Fallback) resolve(l *Loader, key, from string) string {
	if fb == nil || !below(fb.From, from) {
		return key
	}
	if _, ok := l.Overlay[key]; ok {
		return key
	}
	if _, err := os.Lstat(key); !errors.Is(err, fs.ErrNotExist) {
		return key
	}
	rel, err := filepath.Rel(fb.From, key)
	if err != nil {
		return key
	}
	return filepath.Join(fb.To, rel)
}

// nearestStdlib is " (did you mean blaise:NAME?)" for the name of the
// standard library nearest to file's, or "".
func (l *Loader) nearestStdlib(file string) string {
	files, _ := fs.Glob(l.Stdlib, "*.star")
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(f, ".star")
	}
	if near := Nearest(strings.TrimSuffix(file, ".star"), names); near != "" {
		return fmt.Sprintf(" (did you mean %s%s?)", StdlibPrefix, near)
	}
	return ""
}

// below reports whether path lies below dir.
func below(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// read returns the source of the file with key.
func (l *Loader) read(key string) ([]byte, error) {
	if name, ok := strings.CutPrefix(key, StdlibPrefix); ok {
		if l.Stdlib == nil {
			return nil, fmt.Errorf("no plug or module %s in the standard library", displayName(key))
		}
		data, err := fs.ReadFile(l.Stdlib, name)
		if err != nil {
			return nil, fmt.Errorf("no plug or module %s in the standard library%s", displayName(key), l.nearestStdlib(name))
		}
		return data, nil
	}
	if plugref.IsRemote(key) {
		r, err := plugref.Parse(key)
		if err != nil {
			return nil, err
		}
		return l.Remote.Read(r, MaxFileSize)
	}
	if src, ok := l.Overlay[key]; ok {
		return src, nil
	}
	return ReadSource(key)
}

// MaxFileSize is the largest .star file the loader reads: plug files,
// modules and configurations are small programs, and a reference to
// something else (a device, a log) must not be read without end.
const MaxFileSize = 1 << 20

// ReadSource reads the regular file name, refusing anything else (a named
// pipe would block the load forever, /dev/zero never ends) and files larger
// than MaxFileSize. It opens without blocking, then checks what it opened, so
// that a file swapped after a check is not read either.
func ReadSource(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read %s: %v", displayName(name), pe.Err)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", displayName(name), err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot read %s: it is %s, not a regular file", displayName(name), fileType(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", displayName(name), err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("cannot read %s: it is larger than the limit of %d bytes (1 MiB) for a .star file", displayName(name), MaxFileSize)
	}
	return data, nil
}

// fileType names the type of a file that is not a regular one.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file"
	}
}

// displayName is how a file appears in positions and messages: relative to
// the working directory when it lies below it.
func displayName(key string) string {
	if strings.HasPrefix(key, StdlibPrefix) {
		return strings.TrimSuffix(key, ".star")
	}
	if plugref.IsRemote(key) {
		return remoteDisplay(key)
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, key); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return key
}

// load returns the module with key, loading it on first use.
func (l *Loader) load(key string, kind fileKind, predeclared starlark.StringDict, bind func(*starlark.Thread)) (*module, error) {
	for i, k := range l.stack {
		if k == key {
			cycle := make([]string, 0, len(l.stack)-i+1)
			for _, c := range l.stack[i:] {
				cycle = append(cycle, displayName(c))
			}
			cycle = append(cycle, displayName(key))
			return nil, fmt.Errorf("load cycle: %s", strings.Join(cycle, " → "))
		}
	}
	if m, ok := l.modules[key]; ok {
		if m.kind != kind && m.err == nil {
			return nil, kindMismatch(key, kind)
		}
		return m, m.err
	}
	if l.modules == nil {
		l.modules = make(map[string]*module)
	}
	src, err := l.read(key)
	if err != nil {
		return nil, err
	}
	l.stack = append(l.stack, key)
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()

	m := &module{kind: kind, sum: sha256.Sum256(src)}
	thread := &starlark.Thread{
		Name: displayName(key),
		Load: func(_ *starlark.Thread, ref string) (starlark.StringDict, error) {
			target, err := l.resolve(ref, key)
			if err != nil {
				return nil, err
			}
			m.deps = append(m.deps, target)
			dep, err := l.load(target, helperFile, l.withPlug(), nil)
			if err != nil {
				return nil, err
			}
			m.warnings = append(m.warnings, dep.warnings...)
			if err := l.checkRemote(ref, target); err != nil {
				return nil, err
			}
			return dep.globals, nil
		},
		Print: func(_ *starlark.Thread, msg string) {
			if l.Print != nil {
				l.Print(displayName(key), msg)
			}
		},
	}
	thread.SetMaxExecutionSteps(loadSteps)
	if bind != nil {
		bind(thread)
	}
	all := starlark.StringDict{}
	for k, v := range commonPredeclared {
		all[k] = v
	}
	for k, v := range predeclared {
		all[k] = v
	}
	var objects []syntax.Position
	m.globals, objects, err = execFile(thread, displayName(key), src, all)
	if err != nil {
		m.err = WithHint(err, displayName(key), src)
		l.modules[key] = m
		return m, m.err
	}
	own := make([]*Error, len(objects))
	for i, pos := range objects {
		own[i] = &Error{Pos: pos, Msg: `type() answers "dict" for a message's JSON objects, so "object" is read as "dict" here; write "dict"`}
	}
	m.warnings = append(own, m.warnings...)
	if kind == plugFile {
		m.plug, err = finishPlug(thread, key, m.globals)
		if errors.Is(err, ErrNotAPlug) {
			// A module, whole: load() of it by a file loaded later (blaise
			// doc goes through every file of the standard library) gets it.
			m.kind = helperFile
			l.modules[key] = m
			return nil, err
		}
		if m.err = err; m.plug != nil {
			for _, w := range m.warnings {
				m.plug.Warnings = append(m.plug.Warnings, &Error{Pos: w.Pos, Plug: m.plug.Name, Msg: w.Msg})
			}
			checkFlow(m.plug, displayName(key), src)
			if l.Vet && len(m.plug.Mistakes) > 0 {
				var errs Errors
				if m.err != nil {
					errs.add(m.err, syntax.Position{})
				}
				m.err = append(errs, m.plug.Mistakes...).err()
			}
		}
	}
	l.modules[key] = m
	return m, m.err
}

// execFile runs a file as starlark.ExecFileOptions does, after its tests
// of type() against "object" were rewritten (objectTests), which it
// returns.
func execFile(thread *starlark.Thread, name string, src []byte, predeclared starlark.StringDict) (starlark.StringDict, []syntax.Position, error) {
	f, err := FileOptions.Parse(name, src, 0)
	if err != nil {
		return nil, nil, err
	}
	objects := objectTests(f)
	prog, err := starlark.FileProgram(f, predeclared.Has)
	if err != nil {
		return nil, nil, err
	}
	g, err := prog.Init(thread, predeclared)
	g.Freeze()
	return g, objects, err
}

// withPlug returns the predeclared names with plug(), which fails with a
// clear message outside plug files.
func (l *Loader) withPlug() starlark.StringDict {
	d := starlark.StringDict{"plug": plugBuiltin, "PLUG_API_VERSION": starlark.MakeInt(APIVersion)}
	for k, v := range l.Predeclared {
		d[k] = v
	}
	return d
}

// loadSteps bounds the top-level code of one file.
const loadSteps = 10_000_000

func kindMismatch(key string, kind fileKind) error {
	if kind == plugFile {
		return &Error{Msg: displayName(key) + " is a module for load(), not a plug: it does not call plug()", cause: ErrNotAPlug}
	}
	return fmt.Errorf("%s is a plug, not a module: use it in setup() instead of load()", displayName(key))
}

// commonPredeclared are the names every file sees.
var commonPredeclared = starlark.StringDict{
	"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	"json":   json.Module,
	"schema": SchemaModule,
	"type":   typeOf,
}
