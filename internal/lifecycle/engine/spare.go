package engine

// A spare session process is started before its run is known: its start
// (the runtime, package initialisation, the first page faults of the
// binary: a few milliseconds) happens while the front end answers
// initialize and creates the session, not after (docs/performance.md).
// The next run launched on this machine takes it: Launch hands it the
// command line it would have started a process with, the run's directory
// and its run lock, over the control channel. Until then it has nothing
// of a session: no store open, no log line, no lock.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SpareEnv marks a spare session process: its command line comes over
// file descriptor 3 (AwaitRun).
const SpareEnv = "BLAISE_SPARE_SESSION_PROCESS"

// spareLife is how long a spare waits for a run before it is stopped: an
// editor that starts its agent and opens no session keeps no idle process.
// A variable for the tests.
var spareLife = 30 * time.Second

// handover is what a spare gets from Launch.
type handover struct {
	Dir  string   `json:"dir"`
	Args []string `json:"args"`
}

// Spare holds a spare session process (Start) waiting for a run, which
// the next Launch of a run on this machine (Local) of its Engine takes:
// set it as the Engine's Spare.
type Spare struct {
	e     *Engine
	mu    sync.Mutex
	p     *localProcess // nil: none waits
	timer *time.Timer
	over  bool // dropped, or a run launched: no process is started any more
}

// NewSpare returns e's Spare, with no process yet.
func NewSpare(e *Engine) *Spare { return &Spare{e: e} }

// Start starts the spare session process, unless one waits, a run was
// launched already or Drop was called; e's store need not be open yet.
// The process is stopped by Drop, or after spareLife if no run took it.
func (s *Spare) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil || s.over {
		return nil
	}
	lc := Local{Engine: s.e}
	args, err := lc.command()
	if err != nil {
		return err
	}
	// Fd RunLockFD is the spare's from the start: the lock replaces it.
	placeholder, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer placeholder.Close()
	p, err := lc.spawn("", args, placeholder, SpareEnv+"=1")
	if err != nil {
		return fmt.Errorf("starting a spare session process: %w", err)
	}
	s.p = p
	s.e.logger().Debug("a spare session process waits for the next run", "pid", p.cmd.Process.Pid)
	s.timer = time.AfterFunc(spareLife, func() {
		if p := s.takeIf(p, false); p != nil {
			p.discard()
		}
	})
	return nil
}

// Drop stops the spare session process, if no run took it, waits for its
// end, and has Start start no other.
func (s *Spare) Drop() {
	if p := s.take(); p != nil {
		p.discard()
	}
}

// PID is the spare process's id, 0 when none waits (s nil too) or the
// engine launches its runs elsewhere (a Launcher): the run launched next
// runs in it, unless another launch takes it first. The write that begins
// a run names it, so that no write of its own is on the way to the run's
// start.
func (s *Spare) PID() int {
	if s == nil || s.e.Launcher != nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.PID()
}

// take returns the spare process, which is then the caller's, or nil (s
// nil too); Start starts no other.
func (s *Spare) take() *localProcess {
	if s == nil {
		return nil
	}
	return s.takeIf(nil, true)
}

// takeIf returns the spare process, or nil; with want, only if it is
// want. With spend, Start starts no other.
func (s *Spare) takeIf(want *localProcess, spend bool) *localProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = s.over || spend
	p := s.p
	if p == nil || want != nil && p != want {
		return nil
	}
	s.p = nil
	s.timer.Stop()
	return p
}

// hand gives the spare p its run: the command line after the program's
// name, the directory to run in, and the run lock, which it puts on
// RunLockFD. One message: its length, then its JSON, the lock passed with
// its first byte.
func (p *localProcess) hand(dir string, args []string, lock *os.File) error {
	body, err := json.Marshal(handover{Dir: dir, Args: args})
	if err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	rights := unix.UnixRights(int(lock.Fd()))
	n, err := unix.SendmsgN(int(p.control.Fd()), msg, rights, nil, unix.MSG_NOSIGNAL)
	if err == nil && n < len(msg) {
		_, err = p.control.Write(msg[n:])
	}
	return err
}

// discard stops a spare that has no run: without its control channel and
// stdin it exits at once.
func (p *localProcess) discard() {
	p.control.Close()
	p.stdin.Close()
	p.stdout.Close()
	_ = p.cmd.Wait()
}

// ErrNoRunHanded is what AwaitRun returns when the spare's front end
// stopped it without a run.
var ErrNoRunHanded = errors.New("the front end stopped the spare session process without a run")

// AwaitRun is a spare session process's wait for its run (SpareEnv): it
// reads the handover on file descriptor 3, puts the run lock on RunLockFD,
// moves to the run's directory, and returns the command line to run. The
// processes it starts do not inherit the mark.
func AwaitRun() ([]string, error) {
	const ctl = 3
	os.Unsetenv(SpareEnv)
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(ctl, head, oob, unix.MSG_CMSG_CLOEXEC)
	for errors.Is(err, unix.EINTR) {
		n, oobn, _, _, err = unix.Recvmsg(ctl, head, oob, unix.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("waiting for a run: %w", err)
	}
	if n == 0 {
		return nil, ErrNoRunHanded
	}
	lock, err := receivedFD(oob[:oobn])
	if err != nil {
		return nil, err
	}
	defer unix.Close(lock)
	ctlFile := rawFD(ctl)
	if _, err := io.ReadFull(ctlFile, head[n:]); err != nil {
		return nil, fmt.Errorf("waiting for a run: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(head))
	if _, err := io.ReadFull(ctlFile, body); err != nil {
		return nil, fmt.Errorf("waiting for a run: %w", err)
	}
	var h handover
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("the run handed over: %w", err)
	}
	// Inherited, as a session process started for its run has it.
	if err := unix.Dup3(lock, RunLockFD, 0); err != nil {
		return nil, fmt.Errorf("the run lock: %w", err)
	}
	if h.Dir != "" {
		if err := os.Chdir(h.Dir); err != nil {
			return nil, fmt.Errorf("the run's directory: %w", err)
		}
	}
	return h.Args, nil
}

// receivedFD is the one file descriptor a handover carries.
func receivedFD(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil && len(msgs) == 1 {
		var fds []int
		if fds, err = unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			return fds[0], nil
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	return -1, fmt.Errorf("the run handed over carries no run lock (%v)", err)
}

// rawFD reads a file descriptor with read(2), blocking, with no buffer:
// what follows the handover on it is the control channel's.
type rawFD int

func (fd rawFD) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
