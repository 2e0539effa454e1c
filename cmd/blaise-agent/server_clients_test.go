package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// withoutToken is this process's environment without $BLAISE_TOKEN.
func withoutToken() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BLAISE_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// TestTokensPrintTheTokenAloneForShellSubstitution: `tokens api` and
// `tokens registration` print the token alone on stdout, what to do with
// it on stderr, so `export BLAISE_TOKEN=$(blaise-agent tokens api NAME)`
// works.
func TestTokensPrintTheTokenAloneForShellSubstitution(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	script := `export BLAISE_TOKEN=$("$0" tokens api alice --data "$1") && "$0" agents --server "$2"`
	sh := exec.Command("sh", "-c", script, l.bin, l.data, l.url)
	sh.Env = withoutToken()
	var stderr strings.Builder
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil || !strings.Contains(string(out), "demo") {
		t.Fatalf("agents with the token of $(tokens api alice): %v\n%s%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "# API token") || !strings.Contains(stderr.String(), "export BLAISE_TOKEN=bla_") {
		t.Fatalf("tokens api says nothing of the token on stderr:\n%s", stderr.String())
	}
	reg := exec.Command(l.bin, append([]string{"tokens", "registration"}, l.storeFlags()...)...)
	stderr.Reset()
	reg.Stderr = &stderr
	out, err = reg.Output()
	if err != nil || !strings.HasPrefix(string(out), "blr_") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("tokens registration's stdout: %v %q", err, out)
	}
	if !strings.Contains(stderr.String(), "listen --register-token blr_") {
		t.Fatalf("tokens registration says nothing of the token on stderr:\n%s", stderr.String())
	}
}

// TestAMissingOrWrongTokenSaysHowToGetOne: a client refused for its API
// token says what a person does: set $BLAISE_TOKEN, minted with `tokens
// api` on the server's machine, or pass --token; and a token with more
// than the token in it is refused before it is sent, saying so.
func TestAMissingOrWrongTokenSaysHowToGetOne(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	const hint = "set $BLAISE_TOKEN (blaise-agent tokens api NAME on the server's machine) or pass --token"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no token, sessions", []string{"sessions", "--server", l.url}, "no API token"},
		{"a wrong token, sessions", []string{"sessions", "--server", l.url, "--token", "bla_wrong"}, "invalid token"},
		{"no token, run", []string{"run", "--server", l.url, "--agent", "demo", "hi"}, "no API token"},
		{"a wrong token, run", []string{"run", "--server", l.url, "--agent", "demo", "--token", "bla_wrong", "hi"}, "invalid token"},
	} {
		cmd := exec.Command(l.bin, c.args...)
		cmd.Env = withoutToken()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), hint) || !strings.Contains(string(out), "401") {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}
	cmd := exec.Command(l.bin, "agents", "--server", l.url)
	cmd.Env = append(withoutToken(), "BLAISE_TOKEN="+l.token+"\n# API token for alice")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "it must be the token alone") || strings.Contains(string(out), l.token) {
		t.Fatalf("a token with a comment after it: %v\n%s", err, out)
	}
}

// TestListenRefusesAnInvalidNameBeforeRegistering: `listen --name
// runnerA` says which names are valid and suggests one, before it spends
// the registration token, and writes no credential.
func TestListenRefusesAnInvalidNameBeforeRegistering(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute)
	reg := l.mint("registration")
	cred := filepath.Join(l.dir, "runnerA.credential")
	out, err := exec.Command(l.bin, "listen", "-c", filepath.Join(l.dir, "blaise.star"), "--server", l.url, "--agent", "demo",
		"--name", "runnerA", "--credential", cred, "--register-token", reg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--name: invalid runner name "runnerA"`) || !strings.Contains(string(out), "for example --name runnera") {
		t.Fatalf("listen --name runnerA: %v\n%s", err, out)
	}
	if _, err := os.Stat(cred); !os.IsNotExist(err) {
		t.Fatalf("a credential was written: %v", err)
	}
	// The token was not spent: the runner registers with it under the name
	// suggested.
	r := l.startRunnerWith("runnera", "blaise.star", reg)
	if !strings.Contains(r.logs.String(), "registered") {
		t.Fatalf("runnera did not register with the token:\n%s", r.logs)
	}
}

// TestL3_EndingAPausedSessionWithNoRunnerChangesNothing: `sessions end` of
// a paused session while no runner of its agent is connected answers 409,
// says to start `listen` for the agent, and leaves the record as it was,
// however often it is asked: no teardown attempt is counted, and the
// session is never orphaned. Once a runner is there, it ends properly.
func TestL3_EndingAPausedSessionWithNoRunnerChangesNothing(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause", "--teardown-attempts", "3")
	l.writeCleaner()
	r := l.runner("r1", "blaise.star")
	l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello")
	id := l.sessions()[0].ID
	l.drain(r)
	before := l.session(id)
	if before.State != lifecycle.Paused {
		t.Fatalf("before: %s", before.State)
	}
	for i := range 6 {
		out, err := exec.Command(l.bin, "sessions", "end", "--server", l.url, "--token", l.token, id).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "409 Conflict") || !strings.Contains(string(out), "blaise-agent listen --agent demo") {
			t.Fatalf("sessions end %d with no runner: %v\n%s", i+1, err, out)
		}
		after := l.session(id)
		if after.State != lifecycle.Paused || after.Runs != before.Runs || after.Teardown.Attempts != 0 || after.EndReason != "" || len(after.History) != len(before.History) {
			t.Fatalf("sessions end %d with no runner changed the session: %s, %d runs, %d teardown attempts, end reason %q",
				i+1, after.State, after.Runs, after.Teardown.Attempts, after.EndReason)
		}
	}
	r = l.runner("r1", "blaise.star")
	out := l.cli("sessions", "end", "--server", l.url, "--token", l.token, id)
	if !strings.Contains(out, "ended (closed)") {
		t.Fatalf("sessions end with a runner: %s", out)
	}
	if rec := l.session(id); rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Closed || rec.Runs != before.Runs+1 {
		t.Fatalf("after sessions end: %s (%s), %d runs", rec.State, rec.EndReason, rec.Runs)
	}
	if !strings.Contains(r.logs.String(), "torn down reason=closed") {
		t.Fatalf("the teardown did not run on the runner:\n%s", r.logs)
	}
}

// runIn runs `run --server` against the lab's demo agent in dir, with the
// API token tok, and returns its output and error.
func (l *serverLab) runIn(dir, tok string, args ...string) (string, error) {
	cmd := exec.Command(l.bin, append([]string{"run", "--server", l.url, "--agent", "demo"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(withoutToken(), "BLAISE_TOKEN="+tok)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRunThroughTheServerSaysHowToContinueAndContinuesYourLast: run
// --server ends as a local run does, saying how the session ended and the
// --server command that continues it; --continue continues the agent's
// most recently paused session opened with a token of the same name, not
// another person's; an empty --session is refused.
func TestRunThroughTheServerSaysHowToContinueAndContinuesYourLast(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	elsewhere := t.TempDir()
	out, err := l.runIn(elsewhere, l.token, "hello")
	if err != nil {
		t.Fatalf("run --server: %v\n%s", err, out)
	}
	mine := l.sessions()[0].ID
	want := "session " + mine + " paused (idle); continue with: blaise-agent run --server " + l.url + " --agent demo --session " + mine
	if !strings.Contains(out, want) {
		t.Fatalf("run --server does not say how to continue (%q):\n%s", want, out)
	}
	// Another person's session, paused after mine.
	bob := l.mint("api", "bob")
	if out, err := l.runIn(elsewhere, bob, "bob's"); err != nil {
		t.Fatalf("bob's run --server: %v\n%s", err, out)
	}
	var bobs string
	for _, r := range l.sessions() {
		if r.ID != mine {
			bobs = r.ID
		}
	}
	out, err = l.runIn(elsewhere, l.token, "--continue", "again")
	if err != nil || !strings.Contains(out, "echo: again") || !strings.Contains(out, "session "+mine+" paused (idle)") {
		t.Fatalf("run --server --continue: %v\n%s", err, out)
	}
	if rec := l.session(mine); rec.Runs != 2 {
		t.Fatalf("--continue: my session has %d runs, want 2", rec.Runs)
	}
	// Continued from another directory, the agent loads its session where
	// it was opened.
	opened := l.session(mine).CWD
	if out, err := l.runIn(t.TempDir(), l.token, "--session", mine, "/cwd"); err != nil || !strings.Contains(out, "session cwd: "+opened+"\n") {
		t.Fatalf("run --server --session from elsewhere: %v, want the agent's session in %s\n%s", err, opened, out)
	}
	if rec := l.session(mine); rec.Runs != 3 {
		t.Fatalf("my session has %d runs, want 3", rec.Runs)
	}
	if rec := l.session(bobs); rec.Runs != 1 {
		t.Fatalf("--continue resumed bob's session: %d runs", rec.Runs)
	}
	if n := len(l.sessions()); n != 2 {
		t.Fatalf("--continue started a session: %d sessions", n)
	}
	carol := l.mint("api", "carol")
	out, err = l.runIn(elsewhere, carol, "--continue", "hi")
	if err == nil || !strings.Contains(out, "no paused session of agent demo opened with an API token of your name") {
		t.Fatalf("--continue with no paused session of mine: %v\n%s", err, out)
	}
	out, err = l.runIn(elsewhere, l.token, "--session", "nosuchsession", "hi")
	if err == nil || !strings.Contains(out, "session nosuchsession: no such session") || strings.Contains(out, "{") {
		t.Fatalf("--session of no session: %v\n%s", err, out)
	}
	out, err = l.runIn(elsewhere, l.token, "--session", "", "hi")
	if err == nil || !strings.Contains(out, "--session: an empty session id") {
		t.Fatalf("--session \"\": %v\n%s", err, out)
	}
	if n := len(l.sessions()); n != 2 {
		t.Fatalf("a refused run started a session: %d sessions", n)
	}
	out, err = l.runIn(elsewhere, l.token, "--session", mine, "--end", "bye")
	if err != nil || !strings.Contains(out, "session "+mine+" ended (closed)") {
		t.Fatalf("run --server --session --end: %v\n%s", err, out)
	}
	// Under the end policy, leaving ends the session, and run says so.
	l.cli("agents", "set", "demo", "--server", l.url, "--token", l.token, "--idle-policy", "end")
	out, err = l.runIn(elsewhere, l.token, "once")
	if err != nil || !regexp.MustCompile(`session \S+ ended \(completed\)\nit was idle, and its idle policy is end`).MatchString(out) {
		t.Fatalf("run --server under the end policy: %v\n%s", err, out)
	}
}

// TestAServersSessionShowsItsRunnersConfiguration: sessions show --server
// shows the configuration and the directory of the runner that ran the
// session, and the runner, for sessions opened with run --server and with
// acp --server; not the client's directory, nor the server's.
func TestAServersSessionShowsItsRunnersConfiguration(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	elsewhere := t.TempDir()
	if out, err := l.runIn(elsewhere, l.token, "hello"); err != nil {
		t.Fatalf("run --server: %v\n%s", err, out)
	}
	l.openAfter("hello")
	here, err := os.Getwd() // the server's directory
	if err != nil {
		t.Fatal(err)
	}
	recs := l.sessions()
	if len(recs) != 2 {
		t.Fatalf("%d sessions, want 2", len(recs))
	}
	for _, rec := range recs {
		show := l.cli("sessions", "show", rec.ID, "--server", l.url, "--token", l.token)
		for _, want := range []string{
			"config: " + filepath.Join(l.dir, "blaise.star"),
			"directory: " + l.dir,
			"runner: r1",
			"owner: tests (its API token's name)",
		} {
			k, v, _ := strings.Cut(want, ": ")
			if !regexp.MustCompile(`(?m)^` + k + `:\s+` + regexp.QuoteMeta(v) + `$`).MatchString(show) {
				t.Errorf("sessions show %s lacks %q:\n%s", rec.ID, want, show)
			}
		}
		if strings.Contains(show, elsewhere) || strings.Contains(show, here) {
			t.Errorf("sessions show %s names the client's or the server's directory:\n%s", rec.ID, show)
		}
	}
}

// TestL6_AnExpiredSessionWaitsForARunnerToTearDown: a paused session that
// expires while no runner of its agent is connected is left paused, with
// no teardown attempt counted (it is never orphaned for want of a runner);
// once a runner connects, it is torn down there with reason expired.
func TestL6_AnExpiredSessionWaitsForARunnerToTearDown(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause", "--paused-lifetime", "2s", "--teardown-backoff", "100ms", "--teardown-attempts", "2")
	l.writeCleaner()
	r := l.runner("r1", "blaise.star")
	l.openAfter("hello")
	id := l.sessions()[0].ID
	// Draining, the runner takes no more runs; the session pauses only
	// then, and expires with no runner.
	l.drain(r)
	testsupport.Eventually(t, "the server says the teardown waits for a runner", func() bool {
		return strings.Contains(l.logs.String(), "a teardown waits for a runner session="+id)
	})
	if rec := l.session(id); rec.State != lifecycle.Paused || rec.Teardown.Attempts != 0 || rec.Runs != 1 {
		t.Fatalf("an expired session with no runner: %s, %d teardown attempts, %d runs; want paused, none, 1", rec.State, rec.Teardown.Attempts, rec.Runs)
	}
	r = l.runner("r1", "blaise.star")
	testsupport.Eventually(t, "the session is torn down on the runner", func() bool { return l.session(id).State == lifecycle.Ended })
	if rec := l.session(id); rec.EndReason != lifecycle.Expired || rec.Teardown.Attempts != 0 {
		t.Fatalf("ended %s after %d failed attempts; want expired after none", rec.EndReason, rec.Teardown.Attempts)
	}
	if !strings.Contains(r.logs.String(), "torn down reason=expired") {
		t.Fatalf("the teardown did not run on the runner:\n%s", r.logs)
	}
}

// TestATurnStoppedUnderRunServerIsNotASuccess: a turn that the session's
// stop cancels under run --server (its runner drains on SIGTERM) ends run
// with status 1, saying so, after it says where the session stands; a
// script does not take the unanswered prompt for an answer.
func TestATurnStoppedUnderRunServerIsNotASuccess(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	r := l.runner("r1", "blaise.star")
	cmd := exec.Command(l.bin, "run", "--server", l.url, "--agent", "demo", "/plan a; b\n/sleep 60000")
	cmd.Dir = t.TempDir()
	cmd.Env = append(withoutToken(), "BLAISE_TOKEN="+l.token)
	out := new(testsupport.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the turn is under way", func() bool { return strings.Contains(out.String(), "2. [ ] b") })
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("run --server exited with %d (%v)\n%s", code, err, out.String())
	}
	// The agent answers the prompt cancelled, or the proxy answers it as
	// the agent stops: either way, not answered.
	for _, want := range []string{"paused (idle); continue with", "the turn was not answered: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run --server does not say %q:\n%s", want, out.String())
		}
	}
}

// TestSessionsOfAnAgentTheServerLacksIsAnError: sessions --server --agent
// of an agent the server does not have says so, as run and acp do, where an
// empty list would read as "no sessions"; an agent with none lists none.
func TestSessionsOfAnAgentTheServerLacksIsAnError(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second)
	if msg := l.fails("sessions", "--server", l.url, "--token", l.token, "--agent", "demoo"); !strings.Contains(msg, "agent demoo: not found") {
		t.Errorf("sessions of an unknown agent: %s", msg)
	}
	if out := l.cli("sessions", "--server", l.url, "--token", l.token, "--agent", "demo", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("sessions of an agent with none: %q", out)
	}
}

// TestDeletingAnAgentWithSessionsNotEndedWarns: agents delete of an agent
// whose sessions are not all ended deletes it, as before, but says first
// which sessions stay that nothing can continue or end until an agent of
// the name exists again; an agent with none is deleted without a word.
func TestDeletingAnAgentWithSessionsNotEndedWarns(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	if out, err := l.runIn(t.TempDir(), l.token, "hello"); err != nil {
		t.Fatalf("run --server: %v\n%s", err, out)
	}
	id := l.sessions()[0].ID
	out := l.cli("agents", "delete", "demo", "--server", l.url, "--token", l.token)
	if want := "warning: agent demo has 1 sessions not ended: " + id + " (paused)"; !strings.Contains(out, want) {
		t.Errorf("agents delete says %q, want %q", out, want)
	}
	if list := l.cli("agents", "--server", l.url, "--token", l.token); strings.Contains(list, "demo") {
		t.Errorf("the agent is still there:\n%s", list)
	}
	l.cli("agents", "create", "other", "--server", l.url, "--token", l.token)
	if out := l.cli("agents", "delete", "other", "--server", l.url, "--token", l.token); strings.Contains(out, "warning") {
		t.Errorf("deleting an agent with no session warns: %s", out)
	}
}
