package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/browsertest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/chromedp/chromedp"
)

// forkOnServer runs `sessions fork ID --server --json`: the fork's record
// from its standard output, and its standard error.
func (l *serverLab) forkOnServer(id string) (*lifecycle.Record, string, error) {
	l.t.Helper()
	cmd := exec.Command(l.bin, "sessions", "fork", id, "--json", "--server", l.url, "--token", l.token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, stderr.String(), err
	}
	var rec lifecycle.Record
	if err := json.Unmarshal(out, &rec); err != nil {
		l.t.Fatalf("sessions fork --json: %v\n%s", err, out)
	}
	return &rec, stderr.String(), nil
}

// readFile is the text of the file at path under the lab's directory.
func (l *serverLab) readFile(path ...string) string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{l.dir}, path...)...))
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

// forkOf is the session of the server forked from id; nil for none.
func (l *serverLab) forkOf(id string) *lifecycle.Record {
	l.t.Helper()
	for _, r := range l.sessions() {
		if r.ForkedFrom == id {
			return r
		}
	}
	return nil
}

// TestAForkOfAServersSessionHoldsItsUncommittedWorkOnItsRunner: `sessions
// fork --server` has the session's runner fork it: the fork is a server
// session of the same agent, paused on the same runner, forked_from
// recorded and shown; its worktree holds the parent's uncommitted file and
// its conversation is forked (the demo agent offers session/fork); the
// parent stays paused as it was, and each worktree keeps its own work. The
// fork continues with `run --server --session`.
func TestAForkOfAServersSessionHoldsItsUncommittedWorkOnItsRunner(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	// The agent of the runs to come forks conversations: each run loads
	// the configuration again.
	cfg := l.readFile("blaise.star")
	if err := os.WriteFile(filepath.Join(l.dir, "blaise.star"), []byte(strings.Replace(cfg, `"demo-agent", `, `"demo-agent", "--fork", `, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fork, stderr, err := l.forkOnServer(id)
	if err != nil {
		t.Fatalf("sessions fork --server: %v\n%s", err, stderr)
	}
	if fork.ForkedFrom != id || fork.State != lifecycle.Paused || fork.AgentName != "demo" || fork.Runner != "r1" || fork.Runs != 1 {
		t.Fatalf("the fork: forked from %q, %s, agent %q, runner %q, %d runs", fork.ForkedFrom, fork.State, fork.AgentName, fork.Runner, fork.Runs)
	}
	for _, want := range []string{"session " + fork.ID + " is a fork of " + id + ", paused", "blaise-agent run --server " + l.url + " --agent demo --session " + fork.ID} {
		if !strings.Contains(stderr, want) {
			t.Errorf("sessions fork --server: want %q in\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "afresh") {
		t.Errorf("the fork's conversation was not forked:\n%s", stderr)
	}
	if got := l.readFile(".worktrees", fork.ID, "notes.txt"); got != "hello\n" {
		t.Fatalf("the fork's worktree holds %q, want the parent's uncommitted notes", got)
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("the parent after the fork: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
	if err := os.WriteFile(filepath.Join(l.dir, ".worktrees", fork.ID, "notes.txt"), []byte("the fork's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := l.readFile(".worktrees", id, "notes.txt"); got != "hello\n" {
		t.Fatalf("the parent's worktree holds %q after the fork's changed", got)
	}
	srv := []string{"--server", l.url, "--token", l.token}
	if show := l.cli(append([]string{"sessions", "show", fork.ID}, srv...)...); !strings.Contains(show, "forked from") || !strings.Contains(show, id) {
		t.Fatalf("sessions show --server of the fork:\n%s", show)
	}
	l.cli(append([]string{"run", "--agent", "demo", "--session", fork.ID, "next"}, srv...)...)
	testsupport.Eventually(t, "the fork pauses after its second run", func() bool {
		rec := l.session(fork.ID)
		return rec.State == lifecycle.Paused && rec.Runs == 2
	})
	if diff := l.cli(append([]string{"sessions", "diff", fork.ID}, srv...)...); !strings.Contains(diff, "+the fork's") {
		t.Fatalf("sessions diff --server of the fork:\n%s", diff)
	}
	if diff := l.cli(append([]string{"sessions", "diff", id}, srv...)...); !strings.Contains(diff, "+hello") || strings.Contains(diff, "fork") {
		t.Fatalf("sessions diff --server of the parent:\n%s", diff)
	}
	// The fork forked in turn from the dashboard, with no script: a form
	// confirmed, then the new session's page.
	c, csrf := l.signedIn(t)
	resp, body := post(t, c, l.url+"/sessions/"+fork.ID+"/fork", url.Values{"csrf": {csrf}, "confirmed": {"yes"}})
	second := l.forkOf(fork.ID)
	if resp.StatusCode != http.StatusSeeOther || second == nil || resp.Header.Get("Location") != "/sessions/"+second.ID+"?forked="+fork.ID {
		t.Fatalf("a fork from the dashboard: %s, to %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	if got := l.readFile(".worktrees", second.ID, "notes.txt"); got != "the fork's\n" {
		t.Fatalf("the fork of the fork holds %q, want the fork's uncommitted notes", got)
	}
}

// TestAForkOfAServersSessionIsRefusedWithNothingMade: `sessions fork
// --server` refuses, saying why and making no session, an unknown
// session, a session whose turn is running (only a paused session is
// forked, as locally: its environment would change under the fork), an
// ended session, and a session whose runner is not connected (its
// environment is on that runner's machine).
func TestAForkOfAServersSessionIsRefusedWithNothingMade(t *testing.T) {
	t.Parallel()
	l, r, id := newActionsLab(t)
	srv := []string{"--server", l.url, "--token", l.token}
	fork := func(session string) []string { return append([]string{"sessions", "fork", session}, srv...) }
	if out := l.fails(fork("nosuchsession")...); !strings.Contains(out, "no such session") {
		t.Errorf("an unknown session: %s", out)
	}

	c := l.client()
	c.Initialize(`{}`)
	sid := c.NewSession(l.dir)
	c.Prompt(3, sid, "first\n/sleep 60000")
	c.Until(func(m *acp.Message) bool { return strings.Contains(string(m.Raw), "echo: first") })
	var busy string
	for _, rec := range l.sessions() {
		if rec.State == lifecycle.Active {
			busy = rec.ID
		}
	}
	if out := l.fails(fork(busy)...); !strings.Contains(out, "session "+busy+" is active") || !strings.Contains(out, "forked only while paused") {
		t.Errorf("a session whose turn runs: %s", out)
	}
	c.Send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	c.Until(acptest.ResponseTo("3"))
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the session pauses once its client left", func() bool { return l.session(busy).State == lifecycle.Paused })
	l.cli(append([]string{"sessions", "end", busy}, srv...)...)
	if out := l.fails(fork(busy)...); !strings.Contains(out, "is ended; only a paused session can be forked") {
		t.Errorf("an ended session: %s", out)
	}

	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
	testsupport.Eventually(t, "the server sees the runner gone", func() bool { return strings.Contains(l.logs.String(), "runner disconnected") })
	if out := l.fails(fork(id)...); !strings.Contains(out, "its runner r1, where its environment is, is not connected") {
		t.Errorf("a session whose runner is gone: %s", out)
	}
	if n := len(l.sessions()); n != 2 {
		t.Fatalf("%d sessions after the refusals, want the 2 there were", n)
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("the session after the refusals: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
}

// forkHolder is the probe with an on_session that, in a fork's first
// run, makes the file forking and waits for the file go.
const forkHolder = actionsProbe + `
def on_session(ctx, next):
    if ctx.session.forked_from != None:
        ctx.host.exec(["sh", "-c", "touch forking; while [ ! -e go ]; do sleep 0.05; done"], check = True)
    next()
`

// TestARunnerGoneMidForkLeavesNoForkThatSeemsMade: the runner killed
// while it makes a fork, the fork fails once the lease is over, saying
// so; the fork is not left paused as if it were made: it waits for its
// teardown, its failure recorded, and is torn down once the runner is
// back. The parent stays paused as it was.
func TestARunnerGoneMidForkLeavesNoForkThatSeemsMade(t *testing.T) {
	t.Parallel()
	l, r, id := newActionsLab(t)
	cmd, out, release := forkHeldUp(t, l, id)
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	release()
	if err == nil {
		t.Fatalf("a fork whose runner was killed succeeded:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "forking session "+id) {
		t.Fatalf("a fork whose runner was killed:\n%s", out.String())
	}
	if f := l.forkOf(id); f != nil && (f.State == lifecycle.Paused || f.State == lifecycle.Active) {
		t.Fatalf("the fork that failed is left %s: %+v", f.State, f)
	} else if f != nil && (f.Pause == nil || f.Pause.Reason != lifecycle.Failed || f.Pause.Error == "") {
		t.Fatalf("the fork that failed does not say it failed: %+v", f.Pause)
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("the parent after the fork failed: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
	l.runner("r1", "blaise.star")
	testsupport.Eventually(t, "the fork that failed is torn down once the runner is back", func() bool {
		f := l.forkOf(id)
		return f == nil || f.State == lifecycle.Ended
	})
	if got := l.readFile(".worktrees", id, "notes.txt"); got != "hello\n" {
		t.Fatalf("the parent's worktree holds %q", got)
	}
}

// TestForkOfASessionInABrowser: in a real browser, a paused session's page
// has a Fork button; it asks first, and, confirmed, the fork is made on
// the session's runner and the browser is on the fork's page, which says
// it was just forked and links the session it was forked from; the list
// has the new session. The pages pass axe-core.
func TestForkOfASessionInABrowser(t *testing.T) {
	t.Parallel()
	l, _, id := newActionsLab(t)
	tab, do := l.adminTab(t)
	fork := `form[action="/sessions/` + id + `/fork"] button`
	do("the session's page", chromedp.Navigate(l.url+"/sessions/"+id), chromedp.WaitVisible(chromedp.CSS(fork)))
	// Clicked by script: the page's record part, where the button is,
	// may be drawn again as the page starts following the session.
	do("its Fork button", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(document.querySelector(%q).click(), {})`, fork)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	waitText(t, tab, "#question", "Fork session “hello” ("+id+")?")
	browsertest.Accessible(t, tab, "the fork's confirmation")
	do("confirming it", chromedp.Click(chromedp.CSS("form.confirm button.danger")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, tab, "p.notice", "Forked: this is a new session")
	f := l.forkOf(id)
	if f == nil || f.State != lifecycle.Paused || f.Runner != "r1" {
		t.Fatalf("the fork made from the dashboard: %+v", f)
	}
	if u, err := chromedp.Run(tab, chromedp.Evaluate[string](`location.pathname`)); err != nil || u != "/sessions/"+f.ID {
		t.Fatalf("the browser is on %q (%v), want the fork's page", u, err)
	}
	waitText(t, tab, `#record a[href="/sessions/`+id+`"]`, id)
	browsertest.Accessible(t, tab, "the fork's page")
	if got := l.readFile(".worktrees", f.ID, "notes.txt"); got != "hello\n" {
		t.Fatalf("the fork's worktree holds %q", got)
	}
	do("the list", chromedp.Navigate(l.url+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#s-"+f.ID)))
}

// TestAServerRestartMidForkFailsTheForkAndTearsItDown: the server killed
// while a fork's first run is being made and started again, its runner
// hands the run back, but the server does not adopt it: the fork's making
// (the request, its ACP session) went with the server that made it. The
// fork fails, saying so in its record, never paused as if it were made,
// and is torn down on its runner; the parent stays paused as it was.
func TestAServerRestartMidForkFailsTheForkAndTearsItDown(t *testing.T) {
	t.Parallel()
	l, r, id := newActionsLab(t)
	cmd, out, release := forkHeldUp(t, l, id)
	addr := strings.TrimPrefix(l.url, "http://")
	if err := l.serve.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = l.serve.Wait()
	if err := cmd.Wait(); err == nil {
		t.Fatalf("a fork whose server was killed succeeded:\n%s", out.String())
	}
	reconnects := strings.Count(r.logs.String(), "connected server=")
	l.startServer(addr)
	testsupport.Eventually(t, "the runner reconnects", func() bool { return strings.Count(r.logs.String(), "connected server=") > reconnects })
	release()
	testsupport.Eventually(t, "the fork is torn down", func() bool {
		f := l.forkOf(id)
		if f != nil && f.State == lifecycle.Paused {
			t.Fatalf("the fork is paused as if it were made: %+v", f.Pause)
		}
		return f != nil && f.State == lifecycle.Ended
	})
	f := l.forkOf(id)
	if f.Pause == nil || f.Pause.Reason != lifecycle.Failed || !strings.Contains(f.Pause.Error, "the fork of session "+id+" was not made") {
		t.Fatalf("the fork torn down does not say why: %+v", f.Pause)
	}
	if _, err := os.Stat(filepath.Join(l.dir, ".worktrees", f.ID)); !os.IsNotExist(err) {
		t.Fatalf("the fork's worktree is left: %v", err)
	}
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Runs != 1 {
		t.Fatalf("the parent after the fork failed: %s, %d runs; want paused, 1 run", rec.State, rec.Runs)
	}
	if got := l.readFile(".worktrees", id, "notes.txt"); got != "hello\n" {
		t.Fatalf("the parent's worktree holds %q", got)
	}
}

// TestAForkOnADrainingRunnerSaysItDrains: a fork of a session whose
// runner is still connected but draining (its listen got SIGTERM and
// waits for an action to end) is refused, nothing made, saying the
// runner drains, not that it is not connected.
func TestAForkOnADrainingRunnerSaysItDrains(t *testing.T) {
	t.Parallel()
	l, r, id := newActionsLab(t)
	hold, out, release := l.heldUp(t, "the action holds the runner", "started", "sessions", "do", id, "hold", "--server", l.url, "--token", l.token)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the server has the runner draining", func() bool { return strings.Contains(l.logs.String(), "runner draining") })
	msg := l.fails("sessions", "fork", id, "--server", l.url, "--token", l.token)
	if want := "its runner r1, where its environment is, is draining"; !strings.Contains(msg, want) || strings.Contains(msg, "not connected") {
		t.Errorf("a fork on a draining runner: %s\nwant %q", msg, want)
	}
	release()
	if err := hold.Wait(); err != nil {
		t.Fatalf("the action: %v\n%s", err, out.String())
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("listen after SIGTERM: %v\n%s", err, r.logs)
	}
	if n := len(l.sessions()); n != 1 {
		t.Fatalf("%d sessions after the refusal, want the 1 there was", n)
	}
}

// forkHeldUp starts `sessions fork ID --server` with forkHolder in the
// chain and returns once the fork's first run is being made (heldUp).
func forkHeldUp(t *testing.T, l *serverLab, id string) (*exec.Cmd, *testsupport.Buffer, func()) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(l.dir, "probe.star"), []byte(forkHolder), 0o644); err != nil {
		t.Fatal(err)
	}
	return l.heldUp(t, "the fork is being made", "forking", "sessions", "fork", id, "--server", l.url, "--token", l.token)
}

// heldUp starts the command args, a plug of whose run writes the file
// marker in l.dir and then waits for the file "go"; it returns once marker
// is there, with the command's output and release, which writes "go" (at
// the test's end too: the run's process may outlive a killed runner,
// holding its stderr, until it may go on).
func (l *serverLab) heldUp(t *testing.T, what, marker string, args ...string) (*exec.Cmd, *testsupport.Buffer, func()) {
	t.Helper()
	release := func() {
		if err := os.WriteFile(filepath.Join(l.dir, "go"), nil, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(release)
	cmd := exec.Command(l.bin, args...)
	out := new(testsupport.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, what, func() bool {
		_, err := os.Stat(filepath.Join(l.dir, marker))
		return err == nil
	})
	return cmd, out, release
}
