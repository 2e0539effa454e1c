package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// TestLogFollowsALiveRun: `sessions log --follow` shows the turns of a run
// in progress as they are recorded, and exits on its own once the run has
// paused.
func TestLogFollowsALiveRun(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": ""})
	live, err := l.engine.Start(t.Context(), filepath.Join(l.dir, "blaise.star"))
	if err != nil {
		t.Fatal(err)
	}
	s := l.open(live, "")
	s.prompt(3, "first")

	follow := exec.Command(l.engine.Command[0], "sessions", "log", "--follow", "--state-dir", l.stateDir(), live.ID)
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	follow.Stderr = os.Stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	lines := bufio.NewScanner(stdout)
	// until reads the follower's lines up to one equal to want.
	until := func(want string) {
		t.Helper()
		for lines.Scan() {
			if lines.Text() == want {
				return
			}
		}
		t.Fatalf("sessions log --follow ended before %q: %v", want, lines.Err())
	}
	until("echo: first")
	s.prompt(4, "second")
	until("> second")
	until("echo: second")

	if err := live.StopIdle(); err != nil {
		t.Fatal(err)
	}
	if rec := l.wait(live); rec.State != lifecycle.Paused {
		t.Fatalf("after the stop: %s", rec.State)
	}
	for lines.Scan() {
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("sessions log --follow: %v", err)
	}
}

// TestLogFollowsALiveRunOnAServer: `sessions log --follow --server` shows
// the turns of a server's run in progress as they are recorded, each once,
// and exits on its own once the run has paused.
func TestLogFollowsALiveRunOnAServer(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	c, sid := l.openAfter("first")
	follow := exec.Command(l.bin, "sessions", "log", "--follow", "--server", l.url, "--token", l.token, sid)
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	follow.Stderr = os.Stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var seen []string
	until := func(want string) {
		t.Helper()
		for lines.Scan() {
			if seen = append(seen, lines.Text()); lines.Text() == want {
				return
			}
		}
		t.Fatalf("sessions log --follow --server ended before %q: %v\n%s", want, lines.Err(), strings.Join(seen, "\n"))
	}
	until("echo: first")
	if _, resp := c.Turn(3, sid, "second"); resp.Error != nil {
		t.Fatalf("turn: %s", resp.Raw)
	}
	until("> second")
	until("echo: second")
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		seen = append(seen, lines.Text())
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("sessions log --follow --server: %v", err)
	}
	if out := strings.Join(seen, "\n"); strings.Count(out, "echo: first") != 1 || strings.Count(out, "echo: second") != 1 {
		t.Fatalf("a turn shown twice, or not at all:\n%s", out)
	}
}
