package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestTheShellOfAContainerOpensAtATerminal: sessions do ID shell, at a
// terminal, runs the command blaise:container's action shell prints,
// attached to it: a shell in the session's container, which the action
// started. The engine is the fake one of blaise:container's tests (no
// engine can be relied on to run a container here): its exec runs the
// shell on this machine, in the container's workspace.
func TestTheShellOfAContainerOpensAtATerminal(t *testing.T) {
	t.Parallel()
	bin := filepath.Dir(self(t))
	work := t.TempDir()
	test, err := os.ReadFile("../../stdlib/testdata/container-fake-engine.blaisetest")
	if err != nil {
		t.Fatal(err)
	}
	_, fake, _ := strings.Cut(string(test), "-- files/fake-docker --\n")
	fake, _, _ = strings.Cut(fake, "-- setup --\n")
	files := map[string]string{
		"bin/docker":  fake,
		"blaise.star": `agent(command = "blaise-agent", args = ["demo-agent"])` + "\n" + `setup(use("blaise:container", id = "box", inputs = {"image": "debian:12"}))` + "\n",
	}
	for name, text := range files {
		path := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+filepath.Join(work, "bin")+":"+bin+":"+os.Getenv("PATH"),
		"BLAISE_STATE_DIR="+filepath.Join(work, "state"), "TMPDIR="+work, "TERM=dumb")
	run := exec.Command(filepath.Join(bin, "blaise-agent"), "run", "-c", "blaise.star", "hello")
	run.Dir, run.Env = work, env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("blaise-agent run: %v\n%s", err, out)
	}
	ids, err := os.ReadDir(filepath.Join(work, "state", "sessions"))
	if err != nil || len(ids) != 1 {
		t.Fatalf("the sessions: %v %v", ids, err)
	}
	do := exec.Command(filepath.Join(bin, "blaise-agent"), "sessions", "do", ids[0].Name(), "shell")
	do.Dir, do.Env = work, env
	tty, err := pty.Start(do)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	shown := make(chan string, 1)
	go func() {
		var seen bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			seen.Write(buf[:n])
			if err != nil {
				shown <- seen.String()
				return
			}
		}
	}()
	if _, err := tty.WriteString("echo INSIDE-$((6*7)) in $PWD; exit\n"); err != nil {
		t.Fatal(err)
	}
	// The deadline only turns a hang into a failure.
	waited := make(chan error, 1)
	go func() { waited <- do.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(time.Minute):
		do.Process.Kill()
		t.Fatalf("sessions do ID shell did not end: %v", <-waited)
	}
	tty.Close()
	out := <-shown
	if err != nil {
		t.Fatalf("sessions do ID shell: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`docker exec -it -w ` + regexp.QuoteMeta(work) + ` blaise-[a-z0-9]+ sh`),
		regexp.MustCompile(`INSIDE-42 in ` + regexp.QuoteMeta(work)),
	} {
		if !want.MatchString(out) {
			t.Errorf("the terminal lacks %s:\n%s", want, out)
		}
	}
}
