//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/sshtest"
)

// TestAnActionRunsOnTheSSHHostOfItsSession: a session whose environment
// is on a host reached over SSH (hosts.ssh, a real sshd) has its action
// run there, as its turns do: the plug that introduces the host passes
// the action on to it, and the action reads the file the session's run
// made on that host, its output printed. With the host gone (sshd
// killed), the action fails saying which host it could not reach, and
// the session is left as it was. Skipped where sshd cannot run.
func TestAnActionRunsOnTheSSHHostOfItsSession(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t)
	bin := self(t)
	work, far := t.TempDir(), t.TempDir()
	host := fmt.Sprintf(`hosts.ssh(%q, user = %q, port = %d, key = %q, known_hosts = %q, `+
		`options = ["-F", "none", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"], `+
		`command = [BLAISE_AGENT, "hostd", "--workspace", %q])`,
		srv.Addr, srv.User, srv.Port, srv.KeyFile, srv.KnownHostsFile, far)
	files := map[string]string{
		// The agent runs on the host too, whose PATH does not have it.
		"blaise.star": fmt.Sprintf("agent(command = %q, args = [\"demo-agent\"])\n", bin) + `setup(use("./far.star"), use("./probe.star"))
`,
		"far.star": `plug(name = "test/far")

def on_session(ctx, next):
    next(host = ` + host + `)

def on_action(ctx, action, next):
    return next(host = ` + host + `)
`,
		"probe.star": `plug(name = "test/probe", actions = {"look": schema.object(doc = "Show what the run made, and where.")})

def on_session(ctx, next):
    ctx.host.exec(["sh", "-c", "echo made by the run > made.txt"], check = True)
    next()

def on_action(ctx, action, next):
    seen = ctx.host.exec(["sh", "-c", "cat made.txt; echo \"$SSH_CONNECTION\" | cut -d' ' -f3"], check = True).stdout
    action.write(ctx.host.info.kind + " " + ctx.host.info.workspace + "\n" + seen)
    return {"host": ctx.host.info.kind}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "BLAISE_STATE_DIR="+filepath.Join(work, "state"))
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("run", "-c", "blaise.star", "hello"); err != nil {
		t.Fatalf("blaise-agent run: %v\n%s", err, out)
	}
	ids, err := os.ReadDir(filepath.Join(work, "state", "sessions"))
	if err != nil || len(ids) != 1 {
		t.Fatalf("the sessions: %v %v", ids, err)
	}
	id := ids[0].Name()
	if b, err := os.ReadFile(filepath.Join(far, "made.txt")); err != nil || string(b) != "made by the run\n" {
		t.Fatalf("the run made %q on the host (%v)", b, err)
	}
	show := func() lifecycle.Record {
		t.Helper()
		out, err := cli("sessions", "show", id, "--json")
		var rec lifecycle.Record
		if err == nil {
			err = json.Unmarshal([]byte(out), &rec)
		}
		if err != nil {
			t.Fatalf("sessions show --json: %v\n%s", err, out)
		}
		return rec
	}
	before := show()
	if before.State != lifecycle.Paused {
		t.Fatalf("the session after its run: %s", before.State)
	}

	out, err := cli("sessions", "do", id, "look")
	if err != nil {
		t.Fatalf("sessions do ID look: %v\n%s", err, out)
	}
	if want := "ssh " + far + "\nmade by the run\n" + srv.Addr + "\n"; !strings.Contains(out, want) {
		t.Fatalf("sessions do ID look printed\n%s\nwant\n%s", out, want)
	}

	srv.Kill()
	out, err = cli("sessions", "do", id, "look")
	if err == nil {
		t.Fatalf("an action on a host that is gone succeeded:\n%s", out)
	}
	if want := "host ssh " + srv.User + "@" + srv.Addr + ": connect: "; !strings.Contains(out, want) {
		t.Fatalf("an action on a host that is gone says\n%s\nwant %q", out, want)
	}
	after := show()
	if after.State != before.State || after.Runs != before.Runs || !after.ExpiresAt.Equal(before.ExpiresAt) || after.Pause == nil || *after.Pause != *before.Pause {
		t.Fatalf("the session after the action failed: %s, %d runs, expires %s, pause %+v; before: %s, %d runs, expires %s, pause %+v",
			after.State, after.Runs, after.ExpiresAt, after.Pause, before.State, before.Runs, before.ExpiresAt, before.Pause)
	}
}
