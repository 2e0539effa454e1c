package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// secret is the secret keeperPlug registers and logs.
const secret = "s3cr3t-t0ken-4242"

// keeperPlug registers a secret, as blaise:secrets does, and logs it.
const keeperPlug = `plug(name = "keeper")
def on_session(ctx, next):
    redact.secrets({"tok": "` + secret + `"})
    ctx.log.info("token is", "` + secret + `", kind = "` + secret + `")
    next()
`

// keptTitle and keptLogLine are the session's title and plug log line
// of a first prompt with the secret, redacted.
const (
	keptTitle   = "deploy with [REDACTED:tok] now"
	keptLogLine = "INFO  keeper: token is [REDACTED:tok] kind=[REDACTED:tok]"
)

// TestTitleAndPlugLogKeepNoSecretOfTheFirstPrompt: a run's first prompt
// names its session in `sessions`, `sessions show` and the record, and
// what its plug logged is in `sessions log --plugs`, with the secret the
// plug registered redacted (blaise:secrets): no file of the state
// directory and no log line holds it.
func TestTitleAndPlugLogKeepNoSecretOfTheFirstPrompt(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": `setup(use("./keeper.star"))` + "\n", "keeper.star": keeperPlug})
	term := l.startRun("deploy with " + secret + " now\nand more")
	if code := term.exit(); code != 0 {
		t.Fatalf("run exited with %d\n%s", code, term.stderr.String())
	}
	recs, err := l.engine.Store.Sessions(t.Context())
	if err != nil || len(recs) != 1 {
		t.Fatalf("sessions %v %v", recs, err)
	}
	id := recs[0].ID
	// The title and the plug log are stored beside the messages, not
	// before run exits: the session process may outlive it.
	testsupport.Eventually(t, "the title and the plug log", func() bool {
		rec, _ := l.engine.Store.Session(t.Context(), id)
		lines, _ := l.engine.Store.(lifecycle.PlugLogs).PlugLog(t.Context(), id)
		return rec != nil && rec.Title != "" && len(lines) > 0
	})
	sessions := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(self(t), append(append([]string{"sessions"}, args...), "--state-dir", l.stateDir())...).CombinedOutput()
		if err != nil {
			t.Fatalf("sessions %v: %v\n%s", args, err, out)
		}
		if strings.Contains(string(out), secret) {
			t.Errorf("sessions %v shows the secret:\n%s", args, out)
		}
		return string(out)
	}
	if out := sessions(); !strings.Contains(out, "TITLE") || !strings.Contains(out, keptTitle) {
		t.Errorf("sessions lists no title:\n%s", out)
	}
	if out := sessions("show", id); !strings.Contains(out, "title:") || !strings.Contains(out, keptTitle) {
		t.Errorf("sessions show shows no title:\n%s", out)
	}
	if out := sessions("log", "--plugs", id); !strings.Contains(out, "── run 1 ──") || !strings.Contains(out, keptLogLine) {
		t.Errorf("sessions log --plugs:\n%s", out)
	}
	if strings.Contains(term.stderr.String(), secret) {
		t.Errorf("run's stderr holds the secret:\n%s", term.stderr.String())
	}
	holdsNoSecret(t, l.stateDir())
}

// TestTitleAndPlugLogReachTheServerRedacted: a run on a runner sends its
// title and its plug log over its connection; the server's lists, the
// record and `sessions log --plugs --server` show them, redacted.
func TestTitleAndPlugLogReachTheServerRedacted(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	if err := os.WriteFile(filepath.Join(l.dir, "keeper.star"), []byte(keeperPlug), 0o644); err != nil {
		t.Fatal(err)
	}
	l.writeConfig("keeper-config.star", `setup(use("./keeper.star"))`+"\n")
	l.runner("r1", "keeper-config.star")
	// The client sees its prompt echoed: the store and the lists do not.
	l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "deploy with "+secret+" now")
	recs := l.sessions()
	if len(recs) != 1 {
		t.Fatalf("sessions %+v", recs)
	}
	id := recs[0].ID
	server := []string{"--server", l.url, "--token", l.token}
	testsupport.Eventually(t, "the title and the plug log on the server", func() bool {
		return l.session(id).Title == keptTitle && strings.Contains(l.cli(append([]string{"sessions", "log", "--plugs", id}, server...)...), keptLogLine)
	})
	for _, args := range [][]string{{"sessions"}, {"sessions", "show", id}, {"sessions", "log", "--plugs", "--json", id}} {
		out := l.cli(append(args, server...)...)
		if strings.Contains(out, secret) {
			t.Errorf("%v shows the secret:\n%s", args, out)
		}
		if args[len(args)-1] != id && !strings.Contains(out, keptTitle) {
			t.Errorf("%v shows no title:\n%s", args, out)
		}
	}
	holdsNoSecret(t, l.data)
}

// holdsNoSecret checks that no file under dir holds the secret.
func holdsNoSecret(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(data), secret) {
			t.Errorf("%s holds the secret", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSessionsTitleSetsAPersonsTitleThatLaterRunsKeep: `sessions title`
// sets a title that `sessions` lists and a later run of the session
// leaves; an empty or multi-line title is refused with a clear error, and
// the same works for a server's session (PATCH /v1/sessions/ID).
func TestSessionsTitleSetsAPersonsTitleThatLaterRunsKeep(t *testing.T) {
	t.Parallel()
	l := newLab(t, lifecycle.Settings{}, map[string]string{"blaise.star": "setup()\n"})
	if code := l.startRun("the derived title").exit(); code != 0 {
		t.Fatalf("run exited with %d", code)
	}
	recs, err := l.engine.Store.Sessions(t.Context())
	if err != nil || len(recs) != 1 {
		t.Fatalf("sessions %v %v", recs, err)
	}
	id := recs[0].ID
	testsupport.Eventually(t, "the derived title", func() bool {
		rec, _ := l.engine.Store.Session(t.Context(), id)
		return rec != nil && rec.Title == "the derived title"
	})
	sessions := func(args ...string) (string, error) {
		out, err := exec.Command(self(t), append(append([]string{"sessions"}, args...), "--state-dir", l.stateDir())...).CombinedOutput()
		return string(out), err
	}
	if out, err := sessions("title", id, "a person's title"); err != nil || !strings.Contains(out, "session "+id+": a person's title") {
		t.Fatalf("sessions title: %v\n%s", err, out)
	}
	for title, want := range map[string]string{"": "a title cannot be empty", "two\nlines": "control characters"} {
		if out, err := sessions("title", id, title); err == nil || !strings.Contains(out, want) {
			t.Errorf("sessions title %q: %v\n%s", title, err, out)
		}
	}
	if out, err := sessions("title", "nosuchsession", "x"); err == nil || !strings.Contains(out, "no such session") {
		t.Errorf("sessions title of an unknown session: %v\n%s", err, out)
	}
	if code := l.startRun("--session", id, "another prompt").exit(); code != 0 {
		t.Fatalf("the second run exited with %d", code)
	}
	if out, _ := sessions(); !strings.Contains(out, "a person's title") {
		t.Errorf("sessions lists no person's title:\n%s", out)
	}
	if out, _ := sessions("show", id); !strings.Contains(out, "a person's title (set by a person)") {
		t.Errorf("sessions show does not say a person set the title:\n%s", out)
	}

	s := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	s.runner("r1", "blaise.star")
	s.cli("run", "--server", s.url, "--token", s.token, "--agent", "demo", "hello there")
	sid := s.sessions()[0].ID
	if out := s.cli("sessions", "title", "--server", s.url, "--token", s.token, sid, "named on the server"); !strings.Contains(out, "named on the server") {
		t.Errorf("sessions title --server: %s", out)
	}
	if rec := s.session(sid); rec.Title != "named on the server" || !rec.TitleSet {
		t.Errorf("the server's record: title %q, set %v", rec.Title, rec.TitleSet)
	}
}
