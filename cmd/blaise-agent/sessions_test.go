package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
