// Package hostd is the hostd protocol: a hosts.Host served over one
// bidirectional byte stream (a command's stdio, such as ssh or docker exec)
// and the client that turns such a stream back into a hosts.Host.
//
// The stream starts with a handshake: the server writes the line
// "blaise-hostd <version>" and a JSON hello line describing its host; the
// client checks the version and answers with its own version line and
// hello. After it, the stream carries yamux (github.com/hashicorp/yamux),
// the client opening one yamux stream per call. Every call stream starts
// with a header: a 4-byte big-endian length and that many bytes of JSON
// (a request); the answer is a header of the same form (a response),
// followed, for some calls, by raw bytes.
//
// yamux, rather than a multiplexer of our own, because it is small, well
// kept and gives every stream its own flow-control window: an agent's
// stdout that nobody reads stalls that stream only, never the file calls or
// the other processes sharing the connection.
package hostd

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/hashicorp/yamux"
)

// Version is the protocol version this build speaks. Peers must speak the
// same one.
const Version = 1

// magic starts the version line.
const magic = "blaise-hostd "

// maxHeader bounds a header, and a hello line, in bytes.
const maxHeader = 1 << 20

// Hello is what each side tells the other in the handshake.
type Hello struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Home       string `json:"home,omitempty"`
	Tmpdir     string `json:"tmpdir,omitempty"`
	Workspace  string `json:"workspace,omitempty"`
	Persistent bool   `json:"persistent,omitempty"`
	PID        int    `json:"pid,omitempty"` // of the hostd process
}

// writeHello writes the version line and the hello line.
func writeHello(w io.Writer, version int, h Hello) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%d\n%s\n", magic, version, b)
	return err
}

// readHello reads the peer's version line and hello. A peer of another
// version gets an error naming both versions; one that does not speak the
// protocol, an error quoting what it said.
func readHello(r *bufio.Reader, want int) (Hello, error) {
	line, err := readLine(r)
	if err != nil {
		return Hello{}, err
	}
	v, ok := strings.CutPrefix(line, magic)
	if !ok {
		return Hello{}, fmt.Errorf("the far side does not speak the hostd protocol: it said %q", clip(line))
	}
	n, err := strconv.Atoi(v)
	if err != nil || strconv.Itoa(n) != v {
		return Hello{}, fmt.Errorf("the far side sent a bad version line %q", clip(line))
	}
	if n != want {
		return Hello{}, fmt.Errorf("hostd protocol version mismatch: this side speaks %s%d, the far side %s%d", magic, want, magic, n)
	}
	line, err = readLine(r)
	if err != nil {
		return Hello{}, err
	}
	var h Hello
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		return Hello{}, fmt.Errorf("the far side sent a bad hello %q: %v", clip(line), err)
	}
	return h, nil
}

// readLine reads one line of at most maxHeader bytes, without its newline.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxHeader {
			return "", fmt.Errorf("the far side sent a line longer than %d bytes", maxHeader)
		}
		switch {
		case err == nil:
			return strings.TrimSuffix(string(b[:len(b)-1]), "\r"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(b) > 0:
			return "", fmt.Errorf("the far side closed the stream after %q", clip(string(b)))
		case errors.Is(err, io.EOF):
			return "", errors.New("the far side closed the stream before the handshake")
		}
		return "", err
	}
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// localHello describes the host h serves, as the far side sees it.
func localHello(ctx context.Context, h hosts.Host) (Hello, error) {
	info, err := h.Info(ctx)
	if err != nil {
		return Hello{}, err
	}
	return Hello{
		OS:         info.OS,
		Arch:       runtime.GOARCH,
		Home:       info.Home,
		Tmpdir:     info.Tmpdir,
		Workspace:  info.Workspace,
		Persistent: info.Persistent,
		PID:        os.Getpid(),
	}, nil
}

// muxConfig is the yamux configuration of both sides. Streams get a
// larger window than yamux's default so that bulk file transfers are not
// held back by round trips. Keepalives find a peer that vanished without
// closing the stream (a machine that dropped off the network): a ping
// unanswered within the write timeout ends the session, and a hostd then
// kills what it started.
func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.MaxStreamWindowSize = 1 << 20
	c.LogOutput = io.Discard
	c.KeepAliveInterval = 10 * time.Second
	c.ConnectionWriteTimeout = 20 * time.Second
	return c
}

// Call names, the "op" of a request.
const (
	opExec     = "exec"
	opSpawn    = "spawn"
	opStdin    = "stdin"
	opStdout   = "stdout"
	opStderr   = "stderr"
	opSignal   = "signal"
	opKill     = "kill"
	opDial     = "dial"
	opRead     = "read_file"
	opWrite    = "write_file"
	opMkdir    = "mkdir"
	opReadDir  = "readdir"
	opStat     = "stat"
	opLstat    = "lstat"
	opExists   = "exists"
	opRemove   = "rm"
	opRename   = "rename"
	opMkdtemp  = "mkdtemp"
	opSymlink  = "symlink"
	opReadlink = "readlink"
	opChmod    = "chmod"
)

// request is the header of a call stream. Which fields matter depends on
// Op.
type request struct {
	Op        string            `json:"op"`
	Path      string            `json:"path,omitempty"` // fs calls; rename's source, symlink's link, mkdtemp's dir
	To        string            `json:"to,omitempty"`   // rename's destination, symlink's target, mkdtemp's prefix
	Perm      uint32            `json:"perm,omitempty"` // fs.FileMode
	Recursive bool              `json:"recursive,omitempty"`
	Force     bool              `json:"force,omitempty"`
	Size      int64             `json:"size,omitempty"` // write_file: bytes that follow the header
	Argv      []string          `json:"argv,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Stdin     []byte            `json:"stdin,omitempty"`
	HasStdin  bool              `json:"has_stdin,omitempty"` // Stdin was given, even empty
	TimeoutNS int64             `json:"timeout_ns,omitempty"`
	Proc      uint64            `json:"proc,omitempty"` // a spawned process, for stdio, signal, kill
	Signal    string            `json:"signal,omitempty"`
	Addr      string            `json:"addr,omitempty"` // dial
}

// response is the header answering a request.
type response struct {
	Err      *wireError       `json:"err,omitempty"`
	Size     int64            `json:"size,omitempty"` // read_file: bytes that follow the header
	Bool     bool             `json:"bool,omitempty"`
	String   string           `json:"string,omitempty"`
	Info     *wireFileInfo    `json:"info,omitempty"`
	Entries  []hosts.DirEntry `json:"entries,omitempty"`
	Exec     *execResult      `json:"exec,omitempty"`
	Proc     uint64           `json:"proc,omitempty"`
	PID      int              `json:"pid,omitempty"`
	Exited   bool             `json:"exited,omitempty"` // the exit of a spawned process
	ExitCode int              `json:"exit_code,omitempty"`
}

type execResult struct {
	Code     int    `json:"code"`
	Stdout   []byte `json:"stdout,omitempty"`
	Stderr   []byte `json:"stderr,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

type wireFileInfo struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	Mode      uint32    `json:"mode"`
	ModTime   time.Time `json:"mtime"`
	IsDir     bool      `json:"is_dir,omitempty"`
	IsSymlink bool      `json:"is_symlink,omitempty"`
}

// writeHeader writes v as a header.
func writeHeader(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readHeader reads a header into v. Headers longer than maxHeader are
// refused before they are read.
func readHeader(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxHeader {
		return fmt.Errorf("header of %d bytes exceeds the limit of %d", size, maxHeader)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("header: %w", noEOF(err))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("header: %v", err)
	}
	return nil
}

// noEOF turns an EOF in the middle of something into ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// wireError is an error as it crosses the stream. It keeps what callers
// test with errors.Is: the errno (between peers of one OS), the kind of
// failure, and the fs.PathError's op and path.
type wireError struct {
	Msg   string `json:"msg"`
	Op    string `json:"op,omitempty"`
	Path  string `json:"path,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// Kinds of failure that survive the trip whatever the OS.
var kinds = []struct {
	name string
	err  error
}{
	{"not_exist", fs.ErrNotExist},
	{"exist", fs.ErrExist},
	{"permission", fs.ErrPermission},
	{"closed", hosts.ErrClosed},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
}

// toWire encodes err, or returns nil.
func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Msg: err.Error()}
	inner := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		w.Op, w.Path, w.Msg = pe.Op, pe.Path, pe.Err.Error()
		inner = pe.Err
	}
	var errno syscall.Errno
	if errors.As(inner, &errno) {
		w.Errno = int(errno)
	}
	for _, k := range kinds {
		if errors.Is(inner, k.err) {
			w.Kind = k.name
			break
		}
	}
	return w
}

// sameOS is set by the client when the far side runs the same OS, so that
// errno values mean the same on both sides.
func (w *wireError) decode(sameOS bool) error {
	if w == nil {
		return nil
	}
	var inner error
	switch {
	case w.Errno != 0 && sameOS && syscall.Errno(w.Errno).Error() == w.Msg:
		inner = syscall.Errno(w.Errno)
	default:
		inner = &remoteError{msg: w.Msg, kind: w.Kind}
	}
	if w.Op != "" {
		return &fs.PathError{Op: w.Op, Path: w.Path, Err: inner}
	}
	return inner
}

// remoteError is an error of the far side, matching the sentinel of its
// kind with errors.Is.
type remoteError struct {
	msg, kind string
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool {
	for _, k := range kinds {
		if k.name == e.kind && target == k.err {
			return true
		}
	}
	return false
}
