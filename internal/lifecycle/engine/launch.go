package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Launcher starts the session process of a run: on this machine (Local),
// or on a runner of a server.
type Launcher interface {
	Launch(context.Context, Launch) (Process, error)
}

// Checker is a Launcher that may have nowhere to start a run (a server
// with no runner of the session's agent connected). End, and Keep before
// an expiry's teardown or a retry, ask it before they change the session:
// a teardown that cannot start now is no failed attempt, and the session
// is left as it was (L3).
type Checker interface {
	// CanLaunch says why no run of rec can start now; nil: one can.
	CanLaunch(rec *lifecycle.Record) error
}

// Launch is a run to start.
type Launch struct {
	Record *lifecycle.Record
	// Lock is the run's holder of its run lock, released by the engine
	// once the run is settled.
	Lock lifecycle.RunLock
	// Flags are the session process's flags that say which run it is.
	Flags []string
	// Kind is the run's kind, which Flags say too: a launcher that cannot
	// start a kind (a runner too old for action runs) says so.
	Kind lifecycle.Kind
	// Action and ActionArgs, of an action run, are its action and its
	// arguments as Flags say them: a launcher may check them first.
	Action     string
	ActionArgs json.RawMessage
}

// Process is a run's session process, as the engine sees it: ACP on its
// stdin and stdout, and the control channel (session.Control).
type Process interface {
	Stdin() io.WriteCloser
	// Stdout ends when the process has ended; the engine closes it once
	// read to its end.
	Stdout() io.ReadCloser
	Control() io.ReadWriteCloser
	// Wait waits for the process to end.
	Wait() error
	// Signal sends SIGTERM, or with kill SIGKILL, to the run's processes.
	Signal(kill bool)
	// PID is the process id where it is one of this machine's, else 0.
	PID() int
}

// CarryingProcess is a Process whose stdout is made of the lines of its
// transcript, whose records carry its messages toward the client
// (acp.Carrier): a run on a server's runner of protocol 4. The engine
// reads the messages out of the records.
type CarryingProcess interface {
	Process
	CarriesMessages() bool
}

// Local starts session processes on this machine with the Engine's
// Command, on its file store.
type Local struct{ Engine *Engine }

// The file store (filestore.Store) and its run locks, as Local needs them:
// the session process opens the state directory and inherits the lock.
type (
	dirStore interface{ Dir() string }
	fileLock interface{ File() *os.File }
)

// Launch starts the session process of run, or hands the run to the
// Engine's Spare.
func (lc Local) Launch(_ context.Context, run Launch) (Process, error) {
	e := lc.Engine
	store, ok := e.Store.(dirStore)
	if !ok {
		return nil, fmt.Errorf("a session process of this machine needs the file store, not %T", e.Store)
	}
	lock, ok := run.Lock.(fileLock)
	if !ok {
		return nil, fmt.Errorf("a session process of this machine needs a run lock of the file store, not %T", run.Lock)
	}
	dir, err := workDir(run.Record)
	if err != nil {
		return nil, err
	}
	args, err := lc.command()
	if err != nil {
		return nil, err
	}
	args = append(append(args, "--state-dir", store.Dir()), run.Flags...)
	if p := e.Spare.take(); p != nil {
		if err := p.hand(dir, args[1:], lock.File()); err == nil {
			return p, nil
		}
		// Gone before its run (killed): a process of the run's own.
		p.discard()
	}
	p, err := lc.spawn(dir, args, lock.File())
	if err != nil {
		return nil, fmt.Errorf("session %s: starting the session process: %w", run.Record.ID, err)
	}
	return p, nil
}

// command is the command line of a session process before the flags of
// its store and its run.
func (lc Local) command() ([]string, error) {
	e := lc.Engine
	command := e.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		command = []string{exe, "session-process"}
	}
	return append(append([]string(nil), command...), e.LogArgs...), nil
}

// spawn starts the session process args in dir ("": this process's),
// with the control channel on fd 3 and lock on fd RunLockFD, and env
// added to the Engine's environment.
func (lc Local) spawn(dir string, args []string, lock *os.File, env ...string) (*localProcess, error) {
	e := lc.Engine
	var opened []*os.File // closed should the start fail
	fail := func(err error) (*localProcess, error) {
		for _, f := range opened {
			f.Close()
		}
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("control channel: %w", err))
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	opened = append(opened, mine, theirs)
	// Pipes of our own: cmd.Wait must not close the session's output before
	// the reader took its last messages.
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, stdinR, stdin)
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	opened = append(opened, stdout, stdoutW)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	cmd.Dir, cmd.Env = dir, e.Env
	if len(env) > 0 {
		base := e.Env
		if base == nil {
			base = os.Environ()
		}
		cmd.Env = append(slices.Clip(base), env...)
	}
	cmd.ExtraFiles = []*os.File{theirs, lock} // fd 3, fd RunLockFD
	cmd.Stderr = e.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// A group of its own: a Ctrl-C in the terminal is the front end's to
	// handle (cancel the turn), not a signal that kills the run; and a run
	// that must be killed is killed with its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	theirs.Close()
	stdinR.Close()
	stdoutW.Close()
	return &localProcess{cmd: cmd, stdin: stdin, stdout: stdout, control: mine}, nil
}

type localProcess struct {
	cmd     *exec.Cmd
	stdin   *os.File
	stdout  *os.File
	control *os.File
}

func (p *localProcess) Stdin() io.WriteCloser       { return p.stdin }
func (p *localProcess) Stdout() io.ReadCloser       { return p.stdout }
func (p *localProcess) Control() io.ReadWriteCloser { return p.control }
func (p *localProcess) Wait() error                 { return p.cmd.Wait() }
func (p *localProcess) PID() int                    { return p.cmd.Process.Pid }

// Signal signals the process group (the session process made it its own).
func (p *localProcess) Signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// workDir is where the session's runs run, so that its plugs' relative
// paths name the same files in every run: the working directory of its
// first run (the configuration's directory for a record without one).
func workDir(r *lifecycle.Record) (string, error) {
	dir := r.Dir
	if dir == "" {
		dir = filepath.Dir(r.Config)
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("session %s: the directory it runs in: %w", r.ID, err)
	}
	return dir, nil
}
