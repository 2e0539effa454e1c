package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// actionsProbe is a plug whose action hold waits for the file go in the
// runner's directory, having made the file started.
const actionsProbe = `plug(
    name = "acme/probe",
    actions = {"hold": schema.object(doc = "Waits for the file go.")},
)

def on_action(ctx, action, next):
    ctx.host.exec(["sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.05; done"], check = True)
    action.write("held\n")
`

// newActionsLab is a server lab whose runner's directory is a git
// repository and whose chain has blaise:worktree and the probe; it has a
// runner r1 and a paused session with the file notes.txt in its
// worktree, uncommitted.
func newActionsLab(t *testing.T) (*serverLab, *labRunner, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.writeConfig("blaise.star", `setup(use("blaise:worktree", id = "wt"), use("./probe.star", id = "probe"))`+"\n")
	for name, text := range map[string]string{
		"probe.star": actionsProbe,
		".gitignore": ".worktrees/\ndata/\ndemo/\n*.credential\nstarted\ngo\n",
	} {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = l.dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("config", "user.name", "test") // for the merge's commit on the runner
	git("config", "user.email", "test@example.com")
	git("add", "blaise.star", "probe.star", ".gitignore")
	git("commit", "-q", "-m", "init")
	r := l.runner("r1", "blaise.star")
	l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello")
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })
	// The agent's work: a client of a server writes no file for it.
	if err := os.WriteFile(filepath.Join(l.dir, ".worktrees", id, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return l, r, id
}

// fails runs a command that must fail and returns its output.
func (l *serverLab) fails(args ...string) string {
	l.t.Helper()
	out, err := exec.Command(l.bin, args...).CombinedOutput()
	if err == nil {
		l.t.Fatalf("blaise-agent %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestActionsOfAServersSessionRunOnItsRunner: sessions show --server lists
// a server-hosted session's actions; sessions diff, do and checkout with
// --server run them on the session's runner, whose worktree they read,
// and print their output; bad input is refused with the runner's words
// and changes nothing; a merge lands in the runner's repository and, with
// --end, ends the session.
func TestActionsOfAServersSessionRunOnItsRunner(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	srv := []string{"--server", l.url, "--token", l.token}
	show := l.cli(append([]string{"sessions", "show", id}, srv...)...)
	for _, want := range []string{"actions:", "diff", "merge", "hold", "sessions do --server " + l.url + " " + id + " ACTION"} {
		if !strings.Contains(show, want) {
			t.Fatalf("sessions show --server lacks %q:\n%s", want, show)
		}
	}
	diff := l.cli(append([]string{"sessions", "diff", id}, srv...)...)
	if !strings.Contains(diff, "+++ b/notes.txt") || !strings.Contains(diff, "+hello") {
		t.Fatalf("sessions diff --server:\n%s", diff)
	}
	stat := l.cli(append([]string{"sessions", "do", id}, append(srv, "diff", "--stat")...)...)
	if !strings.Contains(stat, "1 file changed, 1 insertion") {
		t.Fatalf("sessions do --server ID diff --stat:\n%s", stat)
	}
	checkout := l.cli(append([]string{"sessions", "checkout", id}, srv...)...)
	if !strings.Contains(checkout, filepath.Join(l.dir, ".worktrees", id)) || !strings.Contains(checkout, "a path on the machine of runner r1") {
		t.Fatalf("sessions checkout --server:\n%s", checkout)
	}
	if out := l.fails(append([]string{"sessions", "checkout", "--shell", id}, srv...)...); !strings.Contains(out, "on the runner's machine") {
		t.Fatalf("sessions checkout --shell --server: %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{id, "dif"}, `unknown action "dif" (did you mean diff?)`},
		{[]string{id, "diff", "stat=maybe"}, "args.stat: want bool, got string"},
		{[]string{"nosuchsession", "diff"}, "no such session"},
	} {
		out := l.fails(append(append([]string{"sessions", "do"}, srv...), c.args...)...)
		if !strings.Contains(out, c.want) {
			t.Errorf("sessions do --server %s: want %q in\n%s", strings.Join(c.args, " "), c.want, out)
		}
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("after the actions: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
	merge := l.cli(append([]string{"sessions", "merge", "--end", id}, srv...)...)
	if !strings.Contains(merge, "merged branch blaise/"+id+" into main") || !strings.Contains(merge, "ended (closed)") {
		t.Fatalf("sessions merge --end --server:\n%s", merge)
	}
	if b, err := os.ReadFile(filepath.Join(l.dir, "notes.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the main checkout after the merge: %q %v", b, err)
	}
}

// TestAnActionWhoseRunnerIsKilledHasAnUnknownOutcome: while an action
// runs on a server-hosted session, a second is refused (its run lock is
// the first's); the runner killed midway, the client is told that the
// action's outcome is unknown and how to check it, once the lease is
// over; the session is paused as it was, and with no runner connected an
// action says to start one. An ended session takes no action.
func TestAnActionWhoseRunnerIsKilledHasAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	l, r, id := newActionsLab(t)
	srv := []string{"--server", l.url, "--token", l.token}
	hold, holdOut, release := l.heldUp(t, "the action started", "started", append([]string{"sessions", "do", id, "hold"}, srv...)...)
	if out := l.fails(append([]string{"sessions", "diff", id}, srv...)...); !strings.Contains(out, "an action runs only on a paused session") {
		t.Fatalf("a second action: %s", out)
	}
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := hold.Wait()
	release()
	if err == nil {
		t.Fatalf("the action whose runner was killed succeeded:\n%s", holdOut.String())
	}
	out := holdOut.String()
	for _, want := range []string{"before it reported how the action went", "its outcome is unknown", "check what it did before you do it again", "sessions diff --server " + l.url + " " + id} {
		if !strings.Contains(out, want) {
			t.Fatalf("the action whose runner was killed: want %q in\n%s", want, out)
		}
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("after the runner was killed: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
	if out := l.fails(append([]string{"sessions", "diff", id}, srv...)...); !strings.Contains(out, "no runner of agent demo is connected") {
		t.Fatalf("an action with no runner: %s", out)
	}
	l.runner("r1", "blaise.star")
	if diff := l.cli(append([]string{"sessions", "diff", id}, srv...)...); !strings.Contains(diff, "+hello") {
		t.Fatalf("sessions diff --server once the runner is back:\n%s", diff)
	}
	l.cli(append([]string{"sessions", "end", id}, srv...)...)
	if out := l.fails(append([]string{"sessions", "diff", id}, srv...)...); !strings.Contains(out, "is ended; actions run only on a paused session") {
		t.Fatalf("an action on an ended session: %s", out)
	}
}
