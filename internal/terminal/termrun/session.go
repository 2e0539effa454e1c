package termrun

// One session's way through a run: its prompts, the stop when the person
// leaves, and the report of where it stands.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
	"github.com/mattn/go-isatty"
)

// terminalRun is one `run` in the terminal: its prompts, the session they
// go to, and the turns that failed.
type terminalRun struct {
	ctx  context.Context // Run's
	opts Options
	e    *engine.Engine
	term *client.Terminal
	sig  chan os.Signal
	in   client.Input
	s    *attached // nil until the first prompt
	// launched is the session of the run launched last: one named before
	// it started, which a first run that cannot load removes.
	launched string
	failed   int  // turns that failed
	left     bool // the person left during a turn
}

// endCommand, typed at the interactive prompt, ends the session.
const endCommand = "/end"

// run sends the prompts to session id ("": a new one) and says where the
// session stands at the end.
func (t *terminalRun) run(id string, interactive bool) error {
	end := t.opts.End
	if interactive && id != "" && isatty.IsTerminal(os.Stdin.Fd()) {
		// The person sees the session and its history before the first
		// prompt. (Lines from a pipe attach at the first prompt, so that
		// an /end there ends the session without a run.)
		if err := t.attachOrReport(id, end); err != nil {
			return err
		}
	}
	for first := true; ; first = false {
		var prompt string
		if interactive {
			line, ok := t.readPrompt()
			if !ok {
				break // the person left (L9), or the session is over
			}
			prompt = strings.TrimRight(line, "\r\n")
			if strings.TrimSpace(prompt) == "" {
				continue
			}
			if strings.TrimSpace(prompt) == endCommand {
				end = true
				break
			}
		} else {
			if !first {
				break
			}
			prompt = strings.Join(t.opts.Prompt, " ")
		}
		if t.s == nil || t.s.ended() {
			// The first prompt, or the session paused while the person
			// was away: (re)attach.
			if t.s != nil {
				id = t.s.live.ID
				t.s.close()
			}
			if err := t.attachOrReport(id, end); err != nil {
				return err
			}
		}
		// An interrupt typed at the prompt is not meant for the turn.
		for len(t.sig) > 0 {
			<-t.sig
		}
		left, err := t.s.prompt(prompt, t.sig)
		switch {
		case errors.Is(err, errEnded):
			return t.report(end)
		case err != nil:
			t.failed++
			fmt.Fprintln(os.Stderr, "blaise-agent: the turn failed:", err)
		}
		if left {
			t.left = true
			break
		}
	}
	if t.s == nil {
		if end && id != "" {
			return t.endAtRest(id)
		}
		if end {
			fmt.Fprintln(os.Stderr, "no session to end")
		}
		return nil
	}
	t.stop(end)
	return t.report(end)
}

// attachOrReport attaches to session id ("": a new one); when that fails
// after the run started, it says where the session stands and returns the
// error to exit with.
func (t *terminalRun) attachOrReport(id string, end bool) error {
	err := t.attach(id, end)
	if err == nil || t.s == nil {
		return err
	}
	// A run that ended on its own has its cause in its record, which
	// report shows.
	if rerr := t.report(end); rerr != nil {
		return rerr
	}
	if errors.Is(err, errInterrupted) {
		return err
	}
	return &exitcode.Error{Code: 1, Err: err}
}

// readPrompt reads the next line at the interactive prompt. It says when
// the session pauses or is about to end on its own while the person is
// away; ok is false when the person leaves or the session is over.
func (t *terminalRun) readPrompt() (prompt string, ok bool) {
	var lines []string
	for ps := "> "; ; ps = continuePrompt {
		line, ok := t.readLine(ps)
		if !ok {
			return "", false
		}
		if strings.TrimSpace(line) != "" {
			t.in.Remember(line)
		}
		// A line ending in a backslash goes on on the next one.
		rest, more := strings.CutSuffix(line, `\`)
		lines = append(lines, rest)
		if !more {
			return strings.Join(lines, "\n"), true
		}
	}
}

// continuePrompt asks for the next line of a prompt of several lines.
const continuePrompt = "… "

// readLine reads one line at the interactive prompt, saying what happens to
// the session meanwhile; ok is false when the person leaves or the session
// is over.
func (t *terminalRun) readLine(ps string) (line string, ok bool) {
	var done <-chan struct{}
	var warn <-chan time.Time
	if t.s != nil && !t.s.ended() {
		done = t.s.live.Done()
		if st := t.s.settings; st.IdlePolicy == lifecycle.PolicyEnd {
			timer := time.NewTimer(max(st.InactivityLimit-warnAhead, 0))
			defer timer.Stop()
			warn = timer.C
		}
	}
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	// Ends with the line, or with ctx; the terminal's reader, one at a time.
	go func() {
		line, err := t.in.ReadLine(ctx, ps)
		got <- read{line, err}
	}()
	for {
		select {
		case r := <-got:
			if r.err != nil {
				fmt.Fprintln(os.Stderr)
				return "", false // end of input, or Ctrl-C in the editor
			}
			return r.line, true
		case <-t.sig:
			fmt.Fprintln(os.Stderr)
			return "", false // Ctrl-C at the prompt leaves
		case <-warn:
			st := t.s.settings
			t.term.Notice(fmt.Sprintf("the session ends in %s unless a prompt comes: its idle policy is end (inactivity limit %s)", min(warnAhead, st.InactivityLimit), st.InactivityLimit))
			warn = nil
		case <-done:
			done, warn = nil, nil
			rec, err := t.s.live.Wait(t.ctx)
			if err != nil || rec.State != lifecycle.Paused || rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle {
				fmt.Fprintln(os.Stderr)
				return "", false // report says what happened
			}
			t.term.Log(fmt.Sprintf("session %s paused (idle); the next prompt resumes it", rec.ID))
		}
	}
}

// warnAhead is how long before the session ends on its own (the run's
// timeout, the end idle policy) the terminal says so.
const warnAhead = time.Minute

// stop asks the run to end: closed when the session is to end, else idle
// under the idle policy, which is announced when it ends the session.
func (t *terminalRun) stop(end bool) {
	s := t.s
	if s.ended() || t.reported() {
		return
	}
	var err error
	switch {
	case end:
		err = s.live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	default:
		if s.settings.IdlePolicy == lifecycle.PolicyEnd {
			fmt.Fprintln(os.Stderr, "leaving ends the session: its idle policy is end")
		}
		err = s.live.StopIdle()
	}
	if err != nil && !s.ended() {
		fmt.Fprintln(os.Stderr, "blaise-agent:", err)
	}
}

// reported tells whether the run has reported its pause: it is over, and
// a stop now would only leave a stale record.
func (t *terminalRun) reported() bool {
	rec, err := t.e.Store.Session(t.ctx, t.s.live.ID)
	return err == nil && rec.Pause != nil && rec.Pause.Run == t.s.live.Run
}

// report waits for the run to end, says where the session stands and
// why, and returns the error that gives run its exit status: a failed run
// or turn, or a session ended by its timeout. A session that should end
// (--end, /end) but paused because its run failed is ended here.
func (t *terminalRun) report(end bool) error {
	s := t.s
	ctx, interrupted := untilSignal(t.ctx, t.sig)
	rec, err := s.live.Wait(ctx)
	if interrupted() {
		fmt.Fprintf(os.Stderr, "\nleft; session %s settles on its own (see blaise-agent sessions)\n", s.live.ID)
		return errInterrupted
	}
	if err != nil {
		return fmt.Errorf("session %s: %w", s.live.ID, err)
	}
	var failure error
	if p := rec.Pause; p != nil && p.Run == s.live.Run && p.Reason == lifecycle.Failed {
		failure = fmt.Errorf("session %s: the run failed: %s", rec.ID, withoutTraceback(p.Error))
	}
	if end && rec.State == lifecycle.Paused {
		// Its run failed, or the stop could not reach it.
		fmt.Fprintf(os.Stderr, "session %s paused; ending it as asked\n", rec.ID)
		if rec, err = t.end(rec.ID); err != nil {
			return errors.Join(failure, fmt.Errorf("session %s: ending it: %w", s.live.ID, err))
		}
	}
	if err := Describe(rec, s.settings, "blaise-agent run"); err != nil {
		failure = errors.Join(failure, err)
	}
	if failure == nil && t.failed > 0 {
		failure = fmt.Errorf("session %s: %d turn(s) failed", rec.ID, t.failed)
	}
	if failure != nil {
		return &exitcode.Error{Code: 1, Err: failure}
	}
	if t.left {
		return client.ErrLeft
	}
	return nil
}

// withoutTraceback is a run's error without the Starlark traceback that
// follows its first line: the session process's log, on the same
// terminal, showed it as the handler failed ("handler failed"), and the
// record keeps it (sessions show).
func withoutTraceback(err string) string {
	if first := lifecycle.WithoutTraceback(err); first != err {
		return first + " (its traceback above)"
	}
	return err
}

// Describe says on stderr where the session stands, and for a paused one
// the command that continues it: run, the command that ran it, with
// --session. The error says why a session ended by its timeout, or whose
// teardown failed, is not fine.
func Describe(rec *lifecycle.Record, st lifecycle.Settings, run string) error {
	switch rec.State {
	case lifecycle.Paused:
		fmt.Fprintf(os.Stderr, "session %s paused (%s); continue with: %s --session %s\n", rec.ID, rec.Pause.Reason, run, rec.ID)
	case lifecycle.Ended:
		fmt.Fprintf(os.Stderr, "session %s ended (%s)\n", rec.ID, rec.EndReason)
		switch rec.EndReason {
		case lifecycle.Timeout:
			return fmt.Errorf("session %s: the run reached its timeout of %s (--timeout)", rec.ID, st.Timeout)
		case lifecycle.Completed:
			fmt.Fprintf(os.Stderr, "it was idle, and its idle policy is end\n")
		}
	default:
		fmt.Fprintf(os.Stderr, "session %s is %s\n", rec.ID, rec.State)
		return fmt.Errorf("session %s: its teardown failed: %s", rec.ID, rec.Teardown.LastError)
	}
	return nil
}

// end ends a session at rest: a teardown run. A signal leaves it to
// finish on its own.
func (t *terminalRun) end(id string) (*lifecycle.Record, error) {
	ctx, interrupted := untilSignal(t.ctx, t.sig)
	rec, err := t.e.End(ctx, id)
	if interrupted() {
		fmt.Fprintf(os.Stderr, "\nleft; session %s tears down on its own (see blaise-agent sessions)\n", id)
		return nil, errInterrupted
	}
	return rec, err
}

// endAtRest ends a session that has no run (/end before any prompt).
func (t *terminalRun) endAtRest(id string) error {
	rec, err := t.end(id)
	if err != nil {
		return err
	}
	if err := Describe(rec, rec.Settings, "blaise-agent run"); err != nil {
		return &exitcode.Error{Code: 1, Err: err}
	}
	return nil
}

func (t *terminalRun) close() {
	if t.s != nil {
		t.s.close()
	}
}

var errEnded = client.ErrRunEnded

// errInterrupted is the status of a run left by a signal before it was done.
var errInterrupted = &exitcode.Error{Code: 130, Err: errors.New("interrupted")}

func (s *attached) close() { s.stop() }
