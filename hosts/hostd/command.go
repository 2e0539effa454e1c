package hostd

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
)

// exitWait bounds how long closing a command transport waits for the
// command to exit before killing it.
const exitWait = 5 * time.Second

// diagnoseWait bounds how long Diagnose waits for the command to exit.
const diagnoseWait = 2 * time.Second

// CommandOptions configures NewCommand.
type CommandOptions struct {
	Via  hosts.Host        // where the command runs
	Argv []string          // the command; it speaks the protocol on its stdio, or with Ship, runs sh
	Env  map[string]string // overlaid on Via's environment
	Kind string            // host.info.kind; "" means "command"
	Name string            // for messages; "" means Kind and ShellJoin(Argv)
	// Ship, when set, is the path of an executable (this program) to send
	// to the far side when it has no copy of it yet. Argv must then run a
	// POSIX shell that reads its commands from stdin; see Ship.
	Ship string
	// Workspace, with Ship, is the shipped hostd's --workspace; "" leaves
	// it in the shell's working directory.
	Workspace string
}

// NewCommand returns a host reached by running opts.Argv on opts.Via; the
// command starts when the host is first used.
func NewCommand(opts CommandOptions) *Client {
	kind := opts.Kind
	if kind == "" {
		kind = "command"
	}
	name := opts.Name
	if name == "" {
		name = kind + " " + ShellJoin(opts.Argv)
	}
	return NewClient(ClientOptions{Name: name, Kind: kind, Connect: func(ctx context.Context) (Transport, error) {
		p, err := opts.Via.Spawn(ctx, hosts.SpawnSpec{Argv: opts.Argv, Env: opts.Env})
		if err != nil {
			return nil, err
		}
		t := newCommandTransport(p)
		if opts.Ship != "" {
			ctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			if err := ship(ctx, t, opts.Ship, opts.Workspace); err != nil {
				t.Close()
				if d := t.Diagnose(); d != "" {
					return nil, fmt.Errorf("%w (%s)", err, d)
				}
				return nil, err
			}
		}
		return t, nil
	}})
}

var shellSafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`) })

// shellKeywords are the reserved words of a POSIX shell that need no
// quoting elsewhere but would not name a command as a first word.
var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true,
	"done": true, "case": true, "esac": true, "while": true, "until": true, "for": true, "in": true, "function": true, "select": true, "time": true}

// ShellJoin renders argv as a command line that a POSIX shell splits back
// into exactly argv, running argv[0]: it names commands in messages, and
// is the remote command ssh hands to the far side's shell.
func ShellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		// A first word with "=" would be an assignment, a keyword syntax.
		if shellSafe().MatchString(a) && (i > 0 || !strings.Contains(a, "=") && !shellKeywords[a]) {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// commandTransport is the stdio of a command.
type commandTransport struct {
	p      hosts.Process
	stderr *tail

	done       chan struct{} // closed when the command exited
	code       int
	stderrDone chan struct{} // closed when its stderr ended

	closeOnce sync.Once
}

func newCommandTransport(p hosts.Process) *commandTransport {
	t := &commandTransport{p: p, stderr: &tail{}, done: make(chan struct{}), stderrDone: make(chan struct{})}
	// Ends with the command's stderr; Diagnose waits for it (stderrDone).
	go func() {
		defer close(t.stderrDone)
		_, _ = io.Copy(t.stderr, p.Stderr())
	}()
	// Close waits for it (done).
	go func() {
		t.code, _ = p.Wait()
		close(t.done)
	}()
	return t
}

func (t *commandTransport) Read(b []byte) (int, error)  { return t.p.Stdout().Read(b) }
func (t *commandTransport) Write(b []byte) (int, error) { return t.p.Stdin().Write(b) }

// Close closes the command's stdin, which ends a hostd, and waits for it to
// exit; a command that does not is killed.
func (t *commandTransport) Close() error {
	t.closeOnce.Do(func() {
		_ = t.p.Stdin().Close()
		select {
		case <-t.done:
		case <-time.After(exitWait):
			_ = t.p.Kill()
			<-t.done
		}
		_ = t.p.Stdout().Close()
	})
	return nil
}

// Diagnose gives the command's exit code, if it exited, and the end of
// its stderr.
func (t *commandTransport) Diagnose() string {
	var parts []string
	timer := time.NewTimer(diagnoseWait)
	defer timer.Stop()
	select {
	case <-t.done:
		parts = append(parts, fmt.Sprintf("the command exited with code %d", t.code))
		select { // the rest of its stderr
		case <-t.stderrDone:
		case <-timer.C:
		}
	case <-timer.C:
	}
	if s := t.stderr.String(); s != "" {
		parts = append(parts, "its stderr ends with: "+s)
	}
	return strings.Join(parts, "; ")
}

// tail keeps the last lines written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

// tailKeep is how much of a transport's stderr is kept.
const tailKeep = 2 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailKeep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailKeep:]...)
	}
	return len(b), nil
}

// String returns the last lines, joined with " | ".
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.TrimSpace(strings.Join(lines, " | "))
}
