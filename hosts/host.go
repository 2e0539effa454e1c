// Package hosts defines where plugs act and agents run: the Host interface
// and the local host, which is the runner's own file system and os/exec.
package hosts

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Info describes a host as plugs see it in host.info.
type Info struct {
	Kind       string // "local", "command", "ssh" …
	OS         string // GOOS of the host
	Home       string // home directory of the user the host runs as
	Tmpdir     string // directory for temporary files
	Workspace  string // directory where work happens (the runner's working directory for the local host)
	Persistent bool   // whether files survive the session's pause
}

// ExecOptions configures Host.Exec.
type ExecOptions struct {
	Dir     string            // working directory; empty: the host's workspace
	Env     map[string]string // overlaid on the host's base environment
	Stdin   []byte            // written to the process's stdin, which is then closed
	Timeout time.Duration     // 0: none; when it passes, the whole process group is killed
	// Stdout, when set, also receives stdout as it comes, where the host
	// can stream it (the local host); other hosts leave it alone.
	Stdout io.Writer
}

// ExecResult is what a finished command left.
type ExecResult struct {
	Code     int // exit code; -1 when killed by a signal
	Stdout   []byte
	Stderr   []byte
	TimedOut bool
}

// SpawnSpec describes a long-running process, such as the agent.
type SpawnSpec struct {
	Argv []string
	Dir  string            // empty: the host's workspace
	Env  map[string]string // overlaid on the host's base environment
}

// Process is a process started by Host.Spawn. Its three standard streams are
// pipes owned by the caller.
type Process interface {
	Pid() int
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// Wait waits for the process to exit and returns its exit code
	// (-1 when killed by a signal). It may be called more than once.
	Wait() (int, error)
	// Signal sends sig ("TERM", "KILL", "INT", "HUP") to the process group.
	Signal(sig string) error
	// Kill kills the process group and waits for the process.
	Kill() error
}

// FileInfo is the result of FS.Stat.
type FileInfo struct {
	Name      string
	Size      int64
	Mode      fs.FileMode
	ModTime   time.Time
	IsDir     bool
	IsSymlink bool
}

// DirEntry is one entry of FS.ReadDir.
type DirEntry struct {
	Name  string
	IsDir bool
}

// FS is a host's file system with Node's fs call names. Paths are the
// host's own paths; relative paths are relative to the host's workspace.
type FS interface {
	ReadFile(ctx context.Context, name string) ([]byte, error)
	WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	Mkdir(ctx context.Context, name string, perm fs.FileMode, recursive bool) error
	ReadDir(ctx context.Context, name string) ([]DirEntry, error)
	Stat(ctx context.Context, name string) (FileInfo, error)  // follows symlinks
	Lstat(ctx context.Context, name string) (FileInfo, error) // does not
	Exists(ctx context.Context, name string) (bool, error)
	Remove(ctx context.Context, name string, recursive, force bool) error
	Rename(ctx context.Context, from, to string) error
	MkdirTemp(ctx context.Context, dir, prefix string) (string, error)
	Symlink(ctx context.Context, target, name string) error
	Readlink(ctx context.Context, name string) (string, error)
	Chmod(ctx context.Context, name string, perm fs.FileMode) error
}

// Host is a machine that plugs act on and agents run on.
type Host interface {
	Info(ctx context.Context) (Info, error)
	Exec(ctx context.Context, argv []string, opts ExecOptions) (ExecResult, error)
	Spawn(ctx context.Context, spec SpawnSpec) (Process, error)
	FS() FS
	// Close kills every process the host started that is still running and
	// releases the connection. Calls after Close fail.
	Close() error
}

// ForwardSpec asks for a port on the runner that reaches a port on the host.
type ForwardSpec struct {
	LocalAddr  string // "127.0.0.1:0" picks a free port
	RemoteAddr string // address as the host sees it, e.g. "127.0.0.1:3000"
}

// Forwarder is implemented by hosts that can forward ports.
type Forwarder interface {
	Forward(ctx context.Context, spec ForwardSpec) (localAddr string, closer io.Closer, err error)
}
