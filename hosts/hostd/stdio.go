//go:build unix

package hostd

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/blaiseagent/blaise-agent/hosts"
)

// ServeStdio serves the local host, with its workspace in workspace (""
// for the working directory), on the process's stdin and stdout, until
// they close or ctx ends.
func ServeStdio(ctx context.Context, workspace string, opts ServeOptions) error {
	if workspace != "" {
		// Checked before serving: a runner then sees why in hostd's stderr
		// rather than failing on each call.
		fi, err := os.Stat(workspace)
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("workspace: %s is not a directory", workspace)
		}
	}
	in, out := pollable(0, "stdin"), pollable(1, "stdout")
	// Nothing else may write to the stream.
	os.Stdout = os.Stderr
	h := hosts.NewLocal(hosts.LocalOptions{Workspace: workspace})
	return Serve(ctx, readWriteCloser{in, out, closers{in, out}}, h, opts)
}

// pollable returns a file of fd in non-blocking mode, so that Go's poller
// serves it and closing it ends a read or write in progress: a peer that
// vanished must not leave hostd blocked on a pipe forever.
func pollable(fd int, name string) *os.File {
	_ = syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}
