package hostd

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/hosts"
)

func TestH2_ShellJoinIsSplitBackIntoArgvByARealShell(t *testing.T) {
	args := []string{"plain", "two words", "it's", "", "$HOME", "`x`", "a\nb", "*", "--opt=v", "X=1", "if"}
	line := ShellJoin(append([]string{"printf", "%s|"}, args...))
	out, err := exec.Command("sh", "-c", line).Output()
	if want := strings.Join(args, "|") + "|"; err != nil || string(out) != want {
		t.Fatalf("%s: the shell saw %q (%v), want %q", line, out, err, want)
	}
	// As a first word, an assignment or a keyword is quoted so that the
	// shell runs it as a command (and finds none).
	for _, first := range []string{"X=1", "if"} {
		line := ShellJoin([]string{first})
		err := exec.Command("sh", "-c", line).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 127 {
			t.Errorf("%s: %v, want exit code 127 (command not found)", line, err)
		}
	}
}

func TestH2_ACommandHostsErrorsNameItAsATypedError(t *testing.T) {
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir()})
	defer local.Close()
	c := NewCommand(CommandOptions{Via: local, Argv: []string{"sh", "-c", "exit 3"}})
	defer c.Close()
	if c.Name() != "command sh -c 'exit 3'" {
		t.Fatalf("name: %s", c.Name())
	}
	_, err := c.Exec(context.Background(), []string{"true"}, hosts.ExecOptions{})
	var he *HostError
	if !errors.As(err, &he) || he.Host != c.Name() {
		t.Fatalf("not a HostError of %s: %#v", c.Name(), err)
	}
	want := "host command sh -c 'exit 3': connect: the far side closed the stream before the handshake (the command exited with code 3)"
	if err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
