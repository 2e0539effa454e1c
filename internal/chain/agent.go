package chain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/charmbracelet/log"
)

// runAgent starts the agent from draft on host and waits until the run is
// stopped or the agent exits; it is the innermost next() (C3).
func (r *Run) runAgent(draft *builtins.AgentDraft, host hosts.Host) builtins.PauseInfo {
	r.mu.Lock()
	r.agentStarted = true
	r.mu.Unlock()
	if p := r.stopPause(); p != nil {
		return *p
	}
	argv, env, cwd, err := draft.Spec()
	if err != nil {
		return r.failed(fmt.Errorf("agent: %w", err))
	}
	agentCtx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	var proc hosts.Process
	r.unlocked(func() { proc, err = host.Spawn(agentCtx, hosts.SpawnSpec{Argv: argv, Dir: cwd, Env: env}) })
	if err != nil {
		return r.failed(fmt.Errorf("the agent failed to start: %w", err))
	}
	r.log.Debug("agent started", "pid", proc.Pid(), "argv", strings.Join(argv, " "))

	attached := make(chan error, 1)
	tail := &stderrTail{}
	// Both waited for below (attached, exited).
	go func() { attached <- r.attach(agentCtx, proc, host, tail) }()
	exited := make(chan int, 1)
	var waitErr error // set before exited is sent
	go func() {
		code, err := proc.Wait()
		waitErr = err
		exited <- code
	}()

	var pause builtins.PauseInfo
	crashed := false // the agent ended on its own, and not well
	// ended is the pause of an agent that ended on its own with code, and
	// whether that was a crash.
	ended := func(code int) (builtins.PauseInfo, bool) {
		if waitErr != nil {
			// The host lost it: the stream to a far host broke.
			return r.failed(fmt.Errorf("the agent's host failed: %w", waitErr)), true
		}
		return r.failed(fmt.Errorf("the agent exited with code %d", code)), code != 0
	}
	r.unlocked(func() {
		select {
		case code := <-exited:
			pause, crashed = ended(code)
		case <-r.stopped:
			pause, crashed = r.agentStopped(proc, exited, ended)
		case <-r.shutdown.Done():
			pause = r.failed(errors.New("the session shut down"))
			r.stopAgent(proc, exited)
		}
		// What the agent left in its process group goes with it.
		_ = proc.Kill()
		// The proxy reads what the agent wrote before it exited; then it
		// is stopped even if something still holds the agent's output.
		select {
		case <-attached:
		case <-time.After(r.opts.AgentGrace):
			// A process that left the agent's group (setsid) may hold
			// its output open: stop reading it.
			cancel()
			_ = proc.Stdout().Close()
			_ = proc.Stderr().Close()
			<-attached
		}
	})
	if p := r.stopPause(); p != nil && r.shutdown.Err() == nil && !crashed {
		// A stop that arrived while the agent was exiting still names the
		// pause; a crash before it stays a failure (C3), whatever the
		// front end, which saw its turn fail, asked for next.
		return *p
	}
	if pause.Err != nil && tail.String() != "" {
		pause.Err = fmt.Errorf("%w%s", pause.Err, tail)
	}
	return pause
}

// agentStopped ends the agent of a run that was stopped, and returns the
// pause. An agent whose output had ended before the stop came may have
// caused it (the front end stops a run whose turn failed as the agent
// went): if it then exits on its own, ended says what the run was.
func (r *Run) agentStopped(proc hosts.Process, exited <-chan int, ended func(code int) (builtins.PauseInfo, bool)) (builtins.PauseInfo, bool) {
	if r.agentEnded.Load() {
		select {
		case code := <-exited:
			if p, crashed := ended(code); crashed {
				return p, true
			}
			return *r.stopPause(), false
		case <-time.After(r.opts.AgentGrace):
		}
	}
	r.stopAgent(proc, exited)
	return *r.stopPause(), false
}

// stopAgent ends the agent: its stdin closes, then SIGTERM, then SIGKILL,
// each after the grace period.
func (r *Run) stopAgent(proc hosts.Process, exited <-chan int) {
	_ = proc.Stdin().Close()
	grace := r.opts.AgentGrace
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	_ = proc.Signal("TERM")
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	r.log.Warn("the agent ignored SIGTERM; killing it", "pid", proc.Pid())
	_ = proc.Kill()
	<-exited
}

// attach connects the agent's streams; stderr goes to the log, and its
// last lines to tail.
func (r *Run) attach(ctx context.Context, proc hosts.Process, host hosts.Host, tail *stderrTail) error {
	done := make(chan struct{})
	// Waited for below (done).
	go func() {
		defer close(done)
		tail.read(r.log.WithPrefix("agent"), proc.Stderr())
	}()
	var err error
	if r.opts.Client != nil {
		err = r.proxy(ctx, proc, host)
	} else {
		_, err = io.Copy(io.Discard, proc.Stdout())
	}
	<-done
	return err
}

// stderrTail keeps the last lines of the agent's stderr, to explain a crash.
type stderrTail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 5

func (t *stderrTail) read(l *log.Logger, rd io.Reader) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		l.Debug(line)
		t.mu.Lock()
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[1:]
		}
		t.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, rd)
}

func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ends with:\n  " + strings.Join(t.lines, "\n  ")
}
