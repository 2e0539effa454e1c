package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestTitleAndPlugLogKeepNoSecretOfTheFirstPrompt: a run's first prompt
// names its session in `sessions`, `sessions show` and the record, and
// what its plug logged is in `sessions log --plugs`, with the secret the
// plug registered redacted (blaise:secrets): no file of the state
// directory and no log line holds it.
func TestTitleAndPlugLogKeepNoSecretOfTheFirstPrompt(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken-4242"
	l := newLab(t, lifecycle.Settings{}, map[string]string{
		"blaise.star": `setup(use("./keeper.star"))` + "\n",
		"keeper.star": `plug(name = "keeper")
def on_session(ctx, next):
    redact.secrets({"tok": "` + secret + `"})
    ctx.log.info("token is", "` + secret + `", kind = "` + secret + `")
    next()
`,
	})
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
	const title = "deploy with [REDACTED:tok] now"
	if out := sessions(); !strings.Contains(out, "TITLE") || !strings.Contains(out, title) {
		t.Errorf("sessions lists no title:\n%s", out)
	}
	if out := sessions("show", id); !strings.Contains(out, "title:") || !strings.Contains(out, title) {
		t.Errorf("sessions show shows no title:\n%s", out)
	}
	if out := sessions("log", "--plugs", id); !strings.Contains(out, "── run 1 ──") || !strings.Contains(out, "INFO  keeper: token is [REDACTED:tok] kind=[REDACTED:tok]") {
		t.Errorf("sessions log --plugs:\n%s", out)
	}
	if strings.Contains(term.stderr.String(), secret) {
		t.Errorf("run's stderr holds the secret:\n%s", term.stderr.String())
	}
	err = filepath.WalkDir(l.stateDir(), func(path string, d fs.DirEntry, err error) error {
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
