package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// TestShellsCompleteASessionID: in a real bash and zsh at a terminal, with
// the script of `blaise-agent completion SHELL` loaded, Tab after `sessions
// show ` inserts the id of the paused session, and Tab after `doc blaise:sa`
// the whole reference, once.
func TestShellsCompleteASessionID(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A hard link, not a symlink: the script names os.Executable, which
	// must be called blaise-agent for testscript's Main to run the command.
	bin := t.TempDir()
	if err := os.Link(exe, filepath.Join(bin, "blaise-agent")); err != nil {
		t.Skipf("cannot link the test binary: %v", err)
	}
	state := filepath.Join(t.TempDir(), "state")
	st, err := filestore.OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	const id = "k3x9pausedone"
	if err := st.CreateSession(t.Context(), &lifecycle.Record{ID: id, Config: "/w/blaise.star", State: lifecycle.Paused, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	for _, shell := range []struct{ name, arg string }{{"bash", "--norc"}, {"zsh", "-f"}} {
		t.Run(shell.name, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(shell.name); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is not installed (.ci/run installs it)", shell.name)
				}
				t.Skipf("%s is not installed", shell.name)
			}
			cmd := exec.Command(shell.name, shell.arg, "-i")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "BLAISE_STATE_DIR="+state,
				"PS1=$ ", "PROMPT=$ ", "TERM=xterm", "HOME="+t.TempDir())
			tty, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
				tty.Close()
			}()
			// Everything the terminal showed so far, after each read.
			screens := make(chan string, 16)
			go func() {
				var seen bytes.Buffer
				buf := make([]byte, 4096)
				for {
					n, err := tty.Read(buf)
					if err != nil {
						close(screens)
						return
					}
					seen.Write(buf[:n])
					screens <- seen.String()
				}
			}()
			// await waits for the terminal to show want, and returns all it
			// showed; the deadline only turns a hang into a failure.
			var shown string
			await := func(want *regexp.Regexp) string {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for {
					select {
					case s, ok := <-screens:
						if !ok {
							t.Fatalf("%s exited before showing %q; it showed:\n%q", shell.name, want, shown)
						}
						if shown = s; want.MatchString(s) {
							return s
						}
					case <-deadline:
						t.Fatalf("%s did not show %q; it showed:\n%q", shell.name, want, shown)
					}
				}
			}
			tty.WriteString("source <(blaise-agent completion " + shell.name + ") && echo LOADED''OK\n")
			await(literal("LOADEDOK"))
			tty.WriteString("blaise-agent sessions show \t")
			await(literal("sessions show " + id))
			// The completed line is echoed to be read back: Ctrl-U clears
			// the line, Ctrl-A goes to its start.
			tty.WriteString("\x15blaise-agent doc blaise:sa\t")
			await(literal("sandbox"))
			tty.WriteString("\x01echo LINE: \n")
			// The echo's output, not the typed line: it follows a line end.
			out := regexp.MustCompile(`[\r\n]LINE: ([^\r\n]*)\r`)
			m := out.FindStringSubmatch(await(out))
			if m[1] != "blaise-agent doc blaise:sandbox" {
				t.Errorf("completed to %q, want blaise-agent doc blaise:sandbox", m[1])
			}
		})
	}
}

func literal(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }
