package main

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// complete runs blaise-agent as a shell does to complete the last word of
// line, with env added, and returns the completions, one a line.
func (l *serverLab) complete(line string, env ...string) []string {
	l.t.Helper()
	cmd := exec.Command(l.bin)
	cmd.Env = append(append(os.Environ(), "BLAISE_SERVER=", "BLAISE_TOKEN=", "COMP_LINE="+line), env...)
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("completing %q: %v\n%s", line, err, out)
	}
	return strings.Fields(string(out))
}

// TestActionNamesOfAServersSessionComplete: after sessions do --server URL
// ID (or with $BLAISE_SERVER), the shell completes the actions the server
// lists for the session; a server that refuses the connection, or that
// accepts it and never answers, completes nothing, and the shell is given
// its answer.
func TestActionNamesOfAServersSessionComplete(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	want := []string{"diff", "log", "merge", "apply", "checkout", "push", "hold"}
	has := func(how string, got []string) {
		t.Helper()
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: completions %q lack %s", how, got, w)
			}
		}
	}
	has("--server URL", l.complete("blaise-agent sessions do --server "+l.url+" --token "+l.token+" "+id+" "))
	has("--server=URL", l.complete("blaise-agent sessions do --server="+l.url+" "+id+" --token="+l.token+" "))
	has("$BLAISE_SERVER", l.complete("blaise-agent sessions do "+id+" ", "BLAISE_SERVER="+l.url, "BLAISE_TOKEN="+l.token))
	if got := l.complete("blaise-agent sessions do --server " + l.url + " --token " + l.token + " " + id + " me"); !slices.Equal(got, []string{"merge"}) {
		t.Errorf("completing me: %q, want merge", got)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		// Accepted, never answered: the connections stay open until the
		// listener's test ends.
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, server := range []string{refused, "http://" + silent.Addr().String()} {
		if got := l.complete("blaise-agent sessions do --server " + server + " " + id + " "); len(got) != 0 {
			t.Errorf("completing with server %s: %q, want nothing", server, got)
		}
	}
}
