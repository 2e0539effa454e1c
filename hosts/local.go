//go:build unix

package hosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned by every call on a host after its Close.
var ErrClosed = errors.New("host closed")

// execWaitDelay bounds how long Exec waits for the command's output after
// its process group was killed, in case a process that left the group
// keeps the pipes open.
const execWaitDelay = time.Second

// defaultPath is searched when the environment of a process has no PATH,
// as execvp does.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// LocalOptions configures NewLocal.
type LocalOptions struct {
	// Workspace is the directory where work happens: relative paths and
	// commands without a directory resolve against it. Empty: the
	// runner's working directory.
	Workspace string
	// BaseEnv is the environment every process starts from; ExecOptions.Env
	// and SpawnSpec.Env are overlaid on it. Nil: the runner's environment.
	BaseEnv map[string]string
	// OnCommand, if set, is told of every command the host is about to
	// start (Exec and Spawn), with its working directory. Calls may come
	// from several goroutines at once.
	OnCommand func(argv []string, dir string)
}

// Local is the runner's own machine: the real file system and os/exec.
// Its files are persistent: they survive the session's pause.
//
// Every process it starts runs in a process group of its own, which lives
// as long as the process: when the process exits, whatever it left running
// in its group is killed, and Close kills the groups of all processes that
// are still running. A command that should keep running must be spawned,
// not started in the background by exec.
type Local struct {
	workspace string
	baseEnv   map[string]string
	onCommand func(argv []string, dir string)
	fs        *localFS

	mu      sync.Mutex
	closed  bool
	running map[*tracked]struct{} // processes started and not yet reaped
}

// tracked is a process started by the host, until it has been reaped.
type tracked struct {
	pgid int
	done chan struct{} // closed once the process has been reaped
	// closeIO, if set, releases the caller's ends of the pipes; Close calls
	// it after the process is gone.
	closeIO func()
}

var _ Host = (*Local)(nil)

// NewLocal returns the local host.
func NewLocal(opts LocalOptions) *Local {
	ws := opts.Workspace
	if ws == "" {
		if wd, err := os.Getwd(); err == nil {
			ws = wd
		} else {
			ws = "."
		}
	}
	if abs, err := filepath.Abs(ws); err == nil {
		ws = abs
	}
	env := opts.BaseEnv
	if env == nil {
		env = environMap(os.Environ())
	} else {
		env = maps.Clone(env)
	}
	h := &Local{
		workspace: ws,
		baseEnv:   env,
		onCommand: opts.OnCommand,
		running:   make(map[*tracked]struct{}),
	}
	h.fs = &localFS{h: h}
	return h
}

// environMap turns KEY=VALUE pairs into a map; later pairs win.
func environMap(kv []string) map[string]string {
	m := make(map[string]string, len(kv))
	for _, s := range kv {
		if k, v, ok := strings.Cut(s, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// Info describes the local machine.
func (h *Local) Info(ctx context.Context) (Info, error) {
	if err := h.check(ctx); err != nil {
		return Info{}, err
	}
	home, _ := os.UserHomeDir()
	return Info{
		Kind:       "local",
		OS:         runtime.GOOS,
		Home:       home,
		Tmpdir:     os.TempDir(),
		Workspace:  h.workspace,
		Persistent: true,
	}, nil
}

// FS returns the real file system, with relative paths resolved against the
// workspace.
func (h *Local) FS() FS { return h.fs }

// check fails when the host is closed or ctx is done.
func (h *Local) check(ctx context.Context) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ctx.Err()
}

// resolve makes name absolute against the workspace.
func (h *Local) resolve(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	return filepath.Join(h.workspace, name)
}

// command prepares an exec.Cmd for argv in dir with env overlaid on the
// base environment. Errors name the program.
func (h *Local) command(ctx context.Context, argv []string, dir string, env map[string]string) (*exec.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("exec: empty argv")
	}
	prog := argv[0]
	merged := maps.Clone(h.baseEnv)
	maps.Copy(merged, env)
	wd := h.workspace
	if dir != "" {
		wd = h.resolve(dir)
	}
	if fi, err := os.Stat(wd); err != nil {
		return nil, fmt.Errorf("exec %q: cwd %s: %w", prog, wd, reason(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("exec %q: cwd %s: %w", prog, wd, syscall.ENOTDIR)
	}
	path, err := lookPath(prog, wd, merged["PATH"], hasKey(merged, "PATH"))
	if err != nil {
		return nil, fmt.Errorf("exec %q: %w", prog, err)
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = slices.Clone(argv)
	cmd.Dir = wd
	cmd.Env = make([]string, 0, len(merged))
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		cmd.Env = append(cmd.Env, k+"="+merged[k])
	}
	cmd.SysProcAttr = sysProcAttr()
	if h.onCommand != nil {
		h.onCommand(argv, wd)
	}
	return cmd, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// errNotFound is the reason a program is missing from PATH.
var errNotFound = errors.New("executable file not found in $PATH")

// lookPath finds prog the way execvp does, but in the given PATH. A name
// with a slash is taken as a path relative to dir.
func lookPath(prog, dir, pathEnv string, havePath bool) (string, error) {
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	if !havePath {
		pathEnv = defaultPath
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			continue // the current directory is never searched implicitly
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, prog)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", errNotFound
}

// executable reports why p cannot be run, or nil.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return reason(err)
	}
	if fi.IsDir() {
		return syscall.EISDIR
	}
	if fi.Mode()&0o111 == 0 {
		return syscall.EACCES
	}
	return nil
}

// reason strips the operation and path from an os error, leaving the
// cause ("no such file or directory").
func reason(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &se):
		return se.Err
	}
	return err
}

// track registers a started process. It fails, after killing the process
// group, when the host was closed meanwhile; the caller must still reap.
func (h *Local) track(t *tracked) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		killGroup(t.pgid)
		return ErrClosed
	}
	h.running[t] = struct{}{}
	return nil
}

// reaped records that a tracked process has exited, after killing what
// it left running in its process group. (The group id cannot have been
// reused while members are left.)
func (h *Local) reaped(t *tracked) {
	killGroup(t.pgid)
	h.mu.Lock()
	delete(h.running, t)
	h.mu.Unlock()
	close(t.done)
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Exec runs argv to completion and returns what it left. The error is
// non-nil only when the program cannot start, the host is closed, or ctx is
// done; in the last two cases the process group is killed and the result
// has Code -1. When opts.Timeout passes, the process group is killed and
// the result has TimedOut set and Code -1. Processes the command left
// running in its group are killed when it exits.
func (h *Local) Exec(ctx context.Context, argv []string, opts ExecOptions) (ExecResult, error) {
	res := ExecResult{Code: -1}
	prog := ""
	if len(argv) > 0 {
		prog = argv[0]
	}
	if err := h.check(ctx); err != nil {
		return res, fmt.Errorf("exec %q: %w", prog, err)
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	defer cancel()
	cmd, err := h.command(runCtx, argv, opts.Dir, opts.Env)
	if err != nil {
		return res, err
	}
	if opts.Stdin != nil {
		cmd.Stdin = bytes.NewReader(opts.Stdin)
	}
	// Output goes through pipes of our own rather than through os/exec's
	// copying, so that Wait returns as soon as the process exits and the
	// group can be killed before waiting for the output to end.
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("exec %q: pipe: %w", prog, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, fmt.Errorf("exec %q: pipe: %w", prog, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = execWaitDelay // kills the leader should the group kill not reach it
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return res, fmt.Errorf("exec %q: %w", prog, reason(err))
	}
	var stdout, stderr bytes.Buffer
	copied := make(chan struct{}, 2)
	var out io.Writer = &stdout
	if opts.Stdout != nil {
		out = io.MultiWriter(&stdout, opts.Stdout)
	}
	// Both waited for below (copied).
	go func() { io.Copy(out, outR); copied <- struct{}{} }()
	go func() { io.Copy(&stderr, errR); copied <- struct{}{} }()

	t := &tracked{pgid: cmd.Process.Pid, done: make(chan struct{})}
	trackErr := h.track(t)
	waitErr := cmd.Wait()
	h.reaped(t) // kills the rest of the group
	timer := time.NewTimer(execWaitDelay)
	for range 2 {
		select {
		case <-copied:
		case <-timer.C:
			// A process outside the group holds the pipes; stop reading.
			outR.Close()
			errR.Close()
			<-copied
		}
	}
	timer.Stop()
	outR.Close()
	errR.Close()

	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.Code = cmd.ProcessState.ExitCode()
	switch {
	case trackErr != nil:
		return res, fmt.Errorf("exec %q: %w", prog, trackErr)
	case ctx.Err() != nil:
		res.Code = -1
		return res, fmt.Errorf("exec %q: %w", prog, ctx.Err())
	case runCtx.Err() != nil:
		res.Code, res.TimedOut = -1, true
		return res, nil
	case res.Code == -1 && h.check(context.Background()) != nil:
		return res, fmt.Errorf("exec %q: %w", prog, ErrClosed)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("exec %q: %w", prog, waitErr)
	}
	return res, nil
}

// Spawn starts a long-running process in a process group of its own, with
// pipes for its standard streams. ctx bounds only the start: the process
// runs until it exits, is killed, or the host is closed. On Linux the
// process is killed if the runner dies.
func (h *Local) Spawn(ctx context.Context, spec SpawnSpec) (Process, error) {
	prog := ""
	if len(spec.Argv) > 0 {
		prog = spec.Argv[0]
	}
	if err := h.check(ctx); err != nil {
		return nil, fmt.Errorf("spawn %q: %w", prog, err)
	}
	// The command must outlive ctx, so it gets no context of its own.
	cmd, err := h.command(context.Background(), spec.Argv, spec.Dir, spec.Env)
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	var files []*os.File // every end, closed on failure
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("spawn %q: pipes: %w", prog, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("spawn: exec %q: %w", prog, reason(err))
	}
	// The child has its ends now.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &localProcess{
		cmd:    cmd,
		stdin:  inW,
		stdout: outR,
		stderr: errR,
		t:      &tracked{pgid: cmd.Process.Pid, done: make(chan struct{})},
	}
	p.t.closeIO = func() {
		inW.Close()
		outR.Close()
		errR.Close()
	}
	trackErr := h.track(p.t)
	// Ends with the process; Wait waits for it.
	go p.wait(h)
	if trackErr != nil {
		<-p.t.done
		p.t.closeIO()
		return nil, fmt.Errorf("spawn %q: %w", prog, trackErr)
	}
	return p, nil
}

// Close kills the process groups of every process the host started that is
// still running, waits for them, and makes further calls fail with
// ErrClosed. Closing twice is a no-op.
func (h *Local) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	running := slices.Collect(maps.Keys(h.running))
	h.mu.Unlock()

	var errs []error
	for _, t := range running {
		if err := killGroup(t.pgid); err != nil {
			errs = append(errs, fmt.Errorf("kill process group %d: %w", t.pgid, err))
		}
	}
	for _, t := range running {
		<-t.done
		if t.closeIO != nil {
			t.closeIO()
		}
	}
	return errors.Join(errs...)
}

// localProcess is a process started by Local.Spawn.
type localProcess struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	t      *tracked

	code    int   // valid once t.done is closed
	waitErr error // likewise
}

var _ Process = (*localProcess)(nil)

// wait reaps the process and records its exit.
func (p *localProcess) wait(h *Local) {
	err := p.cmd.Wait()
	p.code = p.cmd.ProcessState.ExitCode()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		p.waitErr = fmt.Errorf("wait for process %d: %w", p.t.pgid, err)
	}
	h.reaped(p.t)
}

func (p *localProcess) Pid() int              { return p.t.pgid }
func (p *localProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *localProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *localProcess) Stderr() io.ReadCloser { return p.stderr }
func (p *localProcess) exited() bool {
	select {
	case <-p.t.done:
		return true
	default:
		return false
	}
}
func (p *localProcess) Wait() (int, error) { <-p.t.done; return p.code, p.waitErr }

// Signal sends sig ("TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2",
// "STOP", "CONT"; an optional "SIG" prefix is allowed) to the process
// group. It fails once the process has exited.
func (p *localProcess) Signal(sig string) error {
	s, ok := signals[strings.TrimPrefix(strings.ToUpper(sig), "SIG")]
	if !ok {
		return fmt.Errorf("signal %q: unknown signal (want TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP or CONT)", sig)
	}
	if p.exited() {
		return fmt.Errorf("signal %s: process %d has exited", sig, p.t.pgid)
	}
	if err := syscall.Kill(-p.t.pgid, s); err != nil {
		return fmt.Errorf("signal %s to process group %d: %w", sig, p.t.pgid, err)
	}
	return nil
}

// Kill kills the process group and waits for the process.
// Once the process has exited (and its group was killed with it), Kill
// does nothing.
func (p *localProcess) Kill() error {
	if p.exited() {
		return nil
	}
	if err := killGroup(p.t.pgid); err != nil && !p.exited() {
		return fmt.Errorf("kill process group %d: %w", p.t.pgid, err)
	}
	<-p.t.done
	return nil
}

var signals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
	"INT":  syscall.SIGINT,
	"HUP":  syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT,
	"USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
	"STOP": syscall.SIGSTOP,
	"CONT": syscall.SIGCONT,
}
