package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/creack/pty"
)

// ptyRun is `blaise-agent run` on a pseudo-terminal, as a person starts
// it: stdin, stdout and stderr are the terminal.
type ptyRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	tty    *os.File
	mu     sync.Mutex
	out    []byte        // everything the terminal showed, as written
	more   chan struct{} // closed and replaced when out grows
	closed bool          // the terminal has no more output
	exited chan error
}

// startPty starts `run` of the lab's configuration on a terminal, with env
// added to the environment (TERM=xterm and NO_COLOR=1 by default, which
// keeps styles out of what tests look for).
func (l *lab) startPty(env []string, args ...string) *ptyRun {
	l.t.Helper()
	args = append([]string{"run", "-c", filepath.Join(l.dir, "blaise.star"), "--state-dir", l.stateDir()}, args...)
	cmd := exec.Command(self(l.t), args...)
	cmd.Dir = l.dir
	cmd.Env = append(os.Environ(), "TERM=xterm", "NO_COLOR=1", "BLAISE_COLOR=")
	cmd.Env = append(cmd.Env, env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 100})
	if err != nil {
		l.t.Fatal(err)
	}
	p := &ptyRun{t: l.t, cmd: cmd, tty: tty, more: make(chan struct{}), exited: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out = append(p.out, buf[:n]...)
			close(p.more)
			p.more = make(chan struct{})
			if err != nil {
				p.closed = true
			}
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { p.exited <- cmd.Wait() }()
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		tty.Close()
	})
	return p
}

// screen returns what the terminal showed so far.
func (p *ptyRun) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.out)
}

// waitFor waits until the terminal showed what (a regular expression)
// after offset from, and returns where it ends.
func (p *ptyRun) waitFor(from int, what string) int {
	p.t.Helper()
	re := regexp.MustCompile(what)
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		out, more, closed := string(p.out), p.more, p.closed
		p.mu.Unlock()
		if loc := re.FindStringIndex(out[from:]); loc != nil {
			return from + loc[1]
		}
		if closed {
			p.t.Fatalf("run exited without showing %q after:\n%q", what, tail(out[from:]))
		}
		select {
		case <-more:
		case <-deadline:
			p.t.Fatalf("no %q after:\n%q", what, tail(out[from:]))
		}
	}
}

// drained returns all the terminal showed, once it shows no more (run
// exited).
func (p *ptyRun) drained() string {
	for {
		p.mu.Lock()
		out, more, closed := string(p.out), p.more, p.closed
		p.mu.Unlock()
		if closed {
			return out
		}
		<-more
	}
}

// tail returns the end of a long output.
func tail(s string) string { return s[max(0, len(s)-3000):] }

// typeIn types s, as keys.
func (p *ptyRun) typeIn(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.tty, s); err != nil {
		p.t.Fatal(err)
	}
}

// exit waits for run to exit and returns its status.
func (p *ptyRun) exit() int {
	p.t.Helper()
	select {
	case err := <-p.exited:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode()
		}
		if err != nil {
			p.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		p.t.Fatalf("run did not exit; the terminal showed:\n%q", p.screen())
		return -1
	}
}

// exitOK waits for run to exit with status 0.
func (p *ptyRun) exitOK() {
	p.t.Helper()
	if code := p.exit(); code != 0 {
		p.t.Fatalf("exit %d:\n%q", code, tail(p.screen()))
	}
}

// leave types Ctrl-D at the prompt, which leaves.
func (p *ptyRun) leave() {
	p.t.Helper()
	p.typeIn("\x04")
	p.exitOK()
}

// eraseLine is how the spinner takes itself away.
const eraseLine = "\r\x1b[K"

// TestSpinnerNamesThePlugAndIsCleared: while a plug attaches, a spinner
// names it; while the agent has not answered, a spinner says so; both are
// erased before the next line is written.
func TestSpinnerNamesThePlugAndIsCleared(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `
setup(use("blaise:shell", inputs = {"attach": "echo waiting; until [ -e $DIR/go ]; do sleep 0.02; done"}))
`})
	p := l.startPty(nil, "--raw", "/sleep 100\nhello")
	attaching := p.waitFor(0, `attaching: blaise/shell`)
	// The script's line shows while the script still runs. It comes on
	// the session process's log and the plug's name on its control
	// channel: either may show first (a busy machine showed the line
	// first, and the test waited for it after the name in vain).
	at := max(attaching, p.waitFor(0, `waiting session=`))
	if err := os.WriteFile(filepath.Join(l.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	at = p.waitFor(at, `waiting for the agent`)
	p.waitFor(at, `echo: hello`)
	p.exitOK()
	out := p.screen()
	answer := strings.Index(out, "echo: hello")
	last := strings.LastIndex(out[:answer], "waiting for the agent")
	if !strings.Contains(out[last:answer], eraseLine) {
		t.Errorf("the spinner is not erased before the answer:\n%q", out[last:])
	}
}

// TestLogLinesNeverGluedToAgentText: a plug's log lines, logged while the
// agent's line is being written, start lines of their own.
func TestLogLinesNeverGluedToAgentText(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{
		"blaise.star": `setup(use("./tap.star"))`,
		"tap.star": `
plug(name = "acme/tap")

def on_message(ctx, message, next):
    if message.direction == "from_agent" and message.method == "session/update":
        ctx.log.info("update seen")
    return next(message)
`})
	p := l.startPty(nil, "--raw", "/slow 20\n/chunks 4")
	p.waitFor(0, `chunk 4`)
	p.exitOK()
	out := p.screen()
	if n := strings.Count(out, "update seen"); n < 4 {
		t.Fatalf("%d log lines, want 4 at least:\n%q", n, out)
	}
	for i := 0; ; {
		j := strings.Index(out[i:], "INFO acme/tap")
		if j < 0 {
			break
		}
		i += j
		if before := out[:i]; !strings.HasSuffix(before, "\n") && !strings.HasSuffix(before, eraseLine) {
			t.Errorf("a log line glued to what came before it:\n%q", out[max(0, i-40):i+20])
		}
		i++
	}
}

// TestPromptRedrawnAfterIdlePause: when the session pauses while the person
// is at the prompt, the pause is said on a line of its own and the prompt is
// drawn again, with what was being typed.
func TestPromptRedrawnAfterIdlePause(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	p := l.startPty(nil, "--inactivity-limit", "1s")
	at := p.waitFor(0, `> `)
	p.typeIn("hi\r")
	at = p.waitFor(at, `echo: hi`)
	p.typeIn("half")
	at = p.waitFor(at, `half`)
	paused := p.waitFor(at, `paused \(idle\); the next prompt resumes it`)
	at = p.waitFor(paused, `> half`)
	out := p.screen()
	line := out[strings.LastIndexAny(out[:paused], "\r\n")+1 : paused]
	if strings.Contains(line, ">") || strings.Contains(line, "half") {
		t.Errorf("the pause shares the prompt's line: %q", line)
	}
	p.typeIn(" done\r")
	p.waitFor(at, `echo: half done`)
	p.typeIn("\x04") // Ctrl-D leaves
	p.exitOK()
}

// TestHistoryBeforePromptOnResume: --continue shows the session and its
// history before the first prompt, and no prompt among the history's lines.
func TestHistoryBeforePromptOnResume(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	first := l.startPty(nil, "--raw", "hello")
	first.waitFor(0, `echo: hello`)
	first.exitOK()
	p := l.startPty(nil, "--raw", "--continue")
	start := p.waitFor(0, `session \w+ \(run 2\)`)
	end := p.waitFor(start, `echo: hello`)
	prompt := p.waitFor(end, `> `)
	history := p.screen()[start:end]
	for _, want := range []string{"> hello", "echo: hello"} {
		if !strings.Contains(history, want) {
			t.Errorf("history without %q:\n%q", want, history)
		}
	}
	if rest := strings.ReplaceAll(history, "> hello", ""); strings.Contains(rest, ">") {
		t.Errorf("a prompt among the history:\n%q", history)
	}
	p.typeIn("again\r")
	p.waitFor(prompt, `echo: again`)
	p.leave()
}

// TestMultiLinePromptAndHistoryAcrossRuns: a line ending in a backslash, or
// ended with Alt-Enter, goes on on the next one, and the lines typed are
// there again (arrow up) in the next run.
func TestMultiLinePromptAndHistoryAcrossRuns(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	p := l.startPty(nil, "--raw")
	at := p.waitFor(0, `> `)
	p.typeIn("/think one\\\r")
	at = p.waitFor(at, `… `)
	p.typeIn("/say two\x1b\r") // Alt-Enter
	at = p.waitFor(at, `… `)
	p.typeIn("three\r")
	at = p.waitFor(at, `thinking: one\r\ntwo`)
	p.waitFor(at, `echo: three`)
	p.leave()

	again := l.startPty(nil, "--raw")
	at = again.waitFor(0, `> `)
	again.typeIn("\x1b[A") // the last line typed: three
	at = again.waitFor(at, `three`)
	again.typeIn("\r")
	again.waitFor(at, `echo: three`)
	again.leave()
}

// TestMarkdownRenderedUnlessRaw: on a terminal the agent's Markdown is
// rendered; --raw shows it as it came.
func TestMarkdownRenderedUnlessRaw(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	p := l.startPty(nil, `/say # Title\n\nSome **bold** words.`)
	p.waitFor(0, `Some bold words\.`)
	p.exitOK()
	if out := p.screen(); strings.Contains(out, "**") || strings.Contains(out, "# Title") {
		t.Errorf("Markdown not rendered:\n%q", out)
	}
	raw := l.startPty(nil, "--raw", `/say Some **bold** words.`)
	raw.waitFor(0, `Some \*\*bold\*\* words\.`)
	raw.exitOK()
}

// TestColorOffEverywhere: NO_COLOR and --color never take every style away,
// the session process's log included; TERM=dumb also the spinner and the
// line editor's sequences.
func TestColorOffEverywhere(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `
setup(use("blaise:shell", inputs = {"attach": "echo attached"}))
`})
	style := regexp.MustCompile(`\x1b\[[0-9;]*m`)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"NO_COLOR", nil, nil},
		{"--color never", []string{"NO_COLOR="}, []string{"--color", "never"}},
		{"TERM=dumb", []string{"NO_COLOR=", "TERM=dumb"}, nil},
	} {
		p := l.startPty(tc.env, append(tc.args, "/say **bold**\n/think hmm")...)
		p.waitFor(0, `hmm`)
		p.exitOK()
		out := p.screen()
		if !strings.Contains(out, "attached") {
			t.Errorf("%s: no log line:\n%q", tc.name, out)
		}
		if s := style.FindString(out); s != "" {
			t.Errorf("%s: a style (%q) in:\n%q", tc.name, s, out)
		}
		if tc.name == "TERM=dumb" && strings.Contains(out, "\x1b") {
			t.Errorf("%s: an escape sequence in:\n%q", tc.name, out)
		}
	}
	p := l.startPty([]string{"NO_COLOR="}, "--color", "always", "/think hmm")
	p.waitFor(0, `hmm`)
	p.exitOK()
	if !style.MatchString(p.screen()) {
		t.Errorf("--color always: no style in:\n%q", p.screen())
	}
}

// TestSessionProcessOutlivesTheTerminalsLog: the session process's log goes
// through run; when run is gone (killed), the session process still pauses,
// its log lines lost rather than its life (SIGPIPE).
func TestSessionProcessOutlivesTheTerminalsLog(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `
setup(use("blaise:shell", inputs = {"pause": "echo pausing"}))
`})
	p := l.startPty(nil, "--raw")
	at := p.waitFor(0, `> `)
	p.typeIn("hello\r")
	p.waitFor(at, `echo: hello`)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	// The session process lost its front end: it stops as idle and pauses.
	if rec := l.soleSession(lifecycle.Paused); rec.Pause.Reason != "idle" {
		t.Fatalf("pause %+v", rec.Pause)
	}
}

// TestCtrlCInTheEditor: the line editor reads keys itself, Ctrl-C included:
// at a permission question it still cancels the turn, and at the prompt it
// still leaves, the session paused.
func TestCtrlCInTheEditor(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	p := l.startPty(nil, "--raw")
	at := p.waitFor(0, `> `)
	p.typeIn("/permission\r")
	at = p.waitFor(at, `allow\? \[y/n\] `)
	p.typeIn("\x03")
	at = p.waitFor(at, `cancelling the turn`)
	at = p.waitFor(at, `> `)
	p.typeIn("\x03")
	p.waitFor(at, `paused \(idle\)`)
	p.exitOK()
}

// A configuration that does not load is said once, before the prompt would
// show, and run exits 1 without a session; the person types nothing first.
func TestRunRefusesABrokenConfigurationBeforeThePrompt(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `
setup(use("blaise:shell", id = "../wt"))
`})
	p := l.startPty(nil)
	if code := p.exit(); code != 1 {
		t.Fatalf("exit %d, want 1:\n%q", code, p.screen())
	}
	screen := p.drained()
	if n := strings.Count(screen, `invalid plug id "../wt"`); n != 1 {
		t.Errorf("the error shows %d times, want once:\n%q", n, screen)
	}
	if strings.Contains(screen, "> ") {
		t.Errorf("the prompt shows:\n%q", screen)
	}
	if recs, err := l.engine.Store.Sessions(t.Context()); err != nil || len(recs) != 0 {
		t.Errorf("sessions %v (%v), want none", recs, err)
	}
}
