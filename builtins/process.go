package builtins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// Limits of a process value.
const (
	// stderrKeep is how much of the end of a process's stderr is kept.
	stderrKeep = 64 << 10
	// readChunk is the most read from stdout at once.
	readChunk = 32 << 10
	// stderrLinger bounds how long wait() waits, after the process exited,
	// for the rest of its stderr.
	stderrLinger = time.Second
)

// process is the Starlark value of a spawned process (type "process").
// Its stderr is collected in the background (the last 64 KiB) so that the
// process never blocks on it; its stdout is read by the plug with
// read_line and read_all, and a process that writes much more than it is
// read blocks once the pipe is full, as any piped process does.
type process struct {
	interp.Inert // no Starlark-visible state to change
	interp.Unhashable[*process]

	p    hosts.Process
	argv string // for String

	// Reading stdout. A read that a cancelled context abandoned stays
	// pending and its data goes to the next read.
	readMu  sync.Mutex
	buf     bytes.Buffer    // read from stdout, not yet returned
	eof     bool            // stdout has ended
	pending chan readResult // a read in progress, or nil

	writeMu sync.Mutex // serializes writes to stdin

	stderrMu   sync.Mutex
	stderr     []byte        // the last stderrKeep bytes
	stderrDone chan struct{} // closed when stderr has ended
}

type readResult struct {
	data []byte
	err  error
}

var _ starlark.HasAttrs = (*process)(nil)

// newProcess wraps p, which was started with argv, and starts collecting
// its stderr.
func newProcess(p hosts.Process, argv []string) *process {
	v := &process{p: p, argv: shellJoin(argv), stderrDone: make(chan struct{})}
	// Ends with the process's stderr; wait and stderr wait for it (stderrDone).
	go v.collectStderr()
	return v
}

func (v *process) collectStderr() {
	defer close(v.stderrDone)
	defer v.p.Stderr().Close()
	buf := make([]byte, readChunk)
	for {
		n, err := v.p.Stderr().Read(buf)
		if n > 0 {
			v.stderrMu.Lock()
			v.stderr = append(v.stderr, buf[:n]...)
			if len(v.stderr) > stderrKeep {
				v.stderr = append(v.stderr[:0], v.stderr[len(v.stderr)-stderrKeep:]...)
			}
			v.stderrMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

var processAttrNames = []string{"close_stdin", "kill", "pid", "read_all", "read_line", "signal", "stderr", "wait", "write"}

func (v *process) String() string      { return fmt.Sprintf("<process %d: %s>", v.p.Pid(), v.argv) }
func (v *process) Type() string        { return "process" }
func (v *process) AttrNames() []string { return processAttrNames }

func (v *process) Attr(name string) (starlark.Value, error) {
	var impl func(*starlark.Thread, string, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)
	switch name {
	case "pid":
		return starlark.MakeInt(v.p.Pid()), nil
	case "wait":
		impl = v.wait
	case "kill":
		impl = v.kill
	case "signal":
		impl = v.signal
	case "write":
		impl = v.write
	case "close_stdin":
		impl = v.closeStdin
	case "read_line":
		impl = v.readLine
	case "read_all":
		impl = v.readAll
	case "stderr":
		impl = v.stderrText
	default:
		return nil, nil // Starlark reports it, with a hint
	}
	fn := "process." + name
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return impl(thread, fn, args, kwargs)
	}).BindReceiver(v), nil
}

// ioReason strips Go's operation and pipe name from an I/O error
// ("write |1: broken pipe" → "broken pipe").
func ioReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// wait() waits for the process to exit and returns its exit code (-1 when
// killed by a signal).
func (v *process) wait(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	ctx := Context(thread)
	var code int
	var err error
	Blocking(thread, func() {
		type exit struct {
			code int
			err  error
		}
		done := make(chan exit, 1)
		// Left, on ctx's end, to end with the process.
		go func() {
			c, e := v.p.Wait()
			done <- exit{c, e}
		}()
		select {
		case e := <-done:
			code, err = e.code, e.err
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		// Let the collector see the end of stderr, so that stderr() after
		// wait() has all of it.
		select {
		case <-v.stderrDone:
		case <-time.After(stderrLinger):
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.MakeInt(code), nil
}

// kill() kills the process and what it started, and waits for it.
func (v *process) kill(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	var err error
	Blocking(thread, func() { err = v.p.Kill() })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.None, nil
}

// signal(name) sends a signal ("TERM", "INT", "HUP", "KILL" …) to the
// process and what it started.
func (v *process) signal(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackArgs(fn, args, kwargs, "name", &name); err != nil {
		return nil, err
	}
	var err error
	Blocking(thread, func() { err = v.p.Signal(name) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.None, nil
}

// write(data) writes a string or bytes to the process's stdin.
func (v *process) write(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dataV starlark.Value
	if err := starlark.UnpackArgs(fn, args, kwargs, "data", &dataV); err != nil {
		return nil, err
	}
	data, ok := stringOrBytes(dataV)
	if !ok {
		return nil, fmt.Errorf("%s: data: want string or bytes, got %s", fn, dataV.Type())
	}
	ctx := Context(thread)
	var err error
	Blocking(thread, func() {
		done := make(chan error, 1)
		// Left, on ctx's end, to end with the process's stdin.
		go func() {
			v.writeMu.Lock()
			defer v.writeMu.Unlock()
			_, err := io.WriteString(v.p.Stdin(), data)
			done <- err
		}()
		select {
		case err = <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	})
	if errors.Is(err, os.ErrClosed) {
		return nil, fmt.Errorf("%s: stdin is closed", fn)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, ioReason(err))
	}
	return starlark.None, nil
}

// close_stdin() closes the process's stdin, so that it reads end of file.
// Closing it again does nothing.
func (v *process) closeStdin(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	var err error
	Blocking(thread, func() {
		v.writeMu.Lock()
		defer v.writeMu.Unlock()
		err = v.p.Stdin().Close()
	})
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return nil, fmt.Errorf("%s: %w", fn, ioReason(err))
	}
	return starlark.None, nil
}

// read_line() returns the next line of stdout without its newline, or None
// at the end of stdout. A last line without a newline is returned as is.
func (v *process) readLine(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	ctx := Context(thread)
	var line []byte
	var ok bool
	var err error
	Blocking(thread, func() {
		v.readMu.Lock()
		defer v.readMu.Unlock()
		for {
			if i := bytes.IndexByte(v.buf.Bytes(), '\n'); i >= 0 {
				line, ok = bytes.Clone(v.buf.Next(i + 1)[:i]), true
				return
			}
			if v.eof {
				if v.buf.Len() > 0 {
					line, ok = bytes.Clone(v.buf.Bytes()), true
					v.buf.Reset()
				}
				return
			}
			if err = v.readMore(ctx); err != nil {
				return
			}
		}
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", fn, err)
	case !ok:
		return starlark.None, nil
	}
	return starlark.String(line), nil
}

// read_all() returns the rest of stdout, up to its end ("" if it has
// ended).
func (v *process) readAll(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	ctx := Context(thread)
	var data []byte
	var err error
	Blocking(thread, func() {
		v.readMu.Lock()
		defer v.readMu.Unlock()
		for !v.eof {
			if err = v.readMore(ctx); err != nil {
				return
			}
		}
		data = bytes.Clone(v.buf.Bytes())
		v.buf.Reset()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.String(data), nil
}

// readMore reads the next chunk of stdout into buf, or notes its end. When
// ctx is done first, the read stays pending for the next call. The caller
// holds readMu.
func (v *process) readMore(ctx context.Context) error {
	if v.pending == nil {
		ch := make(chan readResult, 1)
		v.pending = ch
		// Kept in v.pending for the next read; ends with the process's stdout.
		go func() {
			b := make([]byte, readChunk)
			n, err := v.p.Stdout().Read(b)
			ch <- readResult{b[:n], err}
		}()
	}
	select {
	case r := <-v.pending:
		v.pending = nil
		v.buf.Write(r.data)
		if r.err != nil {
			v.eof = true
			v.p.Stdout().Close()
			// A host that closed the pipe under us ended the stream too.
			if !errors.Is(r.err, io.EOF) && !errors.Is(r.err, os.ErrClosed) {
				return ioReason(r.err)
			}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stderr() returns what the process wrote to stderr so far (its last 64
// KiB).
func (v *process) stderrText(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(fn, args, kwargs); err != nil {
		return nil, err
	}
	v.stderrMu.Lock()
	defer v.stderrMu.Unlock()
	return starlark.String(v.stderr), nil
}
