//go:build linux

package chain_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/testkit/sshtest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// sshHost is the hosts.ssh(…) expression reaching srv with the given key
// and known_hosts, extra arguments appended.
func sshHost(srv *sshtest.Server, key, known, extra string) string {
	return fmt.Sprintf(`hosts.ssh(%q, user = %q, port = %d, key = %q, known_hosts = %q, `+
		`options = ["-F", "none", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]%s)`,
		srv.Addr, srv.User, srv.Port, key, known, extra)
}

// hostdOver is the command argument that runs the test binary as hostd in
// workspace on the far side (sshd sees the same file system).
func hostdOver(workspace string) string {
	argv, _ := json.Marshal([]string{os.Args[0], "hostd", "--workspace", workspace})
	return ", command = " + string(argv)
}

func TestH2_SSHHostRunsTheAgentAndTheTurnEqualsLocal(t *testing.T) {
	srv := sshtest.Start(t)
	other := t.TempDir()
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./switch.star"), use("./inner.star"))`,
		"switch.star": switchPlug(sshHost(srv, srv.KeyFile, srv.KnownHostsFile, hostdOver(other))),
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    print("HINFO", ctx.host.info.kind, ctx.host.info.workspace)
    print("PWD", ctx.host.exec(["pwd"]).stdout.strip())
    print("CLIENT", ctx.host.exec(["sh", "-c", "echo $SSH_CONNECTION"]).stdout.split(" ")[2])
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v\n%s", res.Pause, c.logs.String())
	}
	for marker, want := range map[string]string{"HINFO ": "ssh " + other, "PWD ": other, "CLIENT ": srv.Addr} {
		if got := strings.Join(c.lines(marker), "|"); got != want {
			t.Errorf("%s: got %q, want %q", marker, got, want)
		}
	}

	cwd := t.TempDir()
	local := turn(t, "", cwd)
	remote := turn(t, switchPlug(sshHost(srv, srv.KeyFile, srv.KnownHostsFile, hostdOver(t.TempDir()))), cwd)
	compareRecords(t, local, remote)
}

func TestC3_SSHServerKilledOrCutMidTurnPausesFailed(t *testing.T) {
	for _, fault := range []string{"kill", "cut"} {
		t.Run(fault, func(t *testing.T) {
			srv := sshtest.Start(t)
			s, hostdPid, agent := turnOnAFarHost(t, sshHost(srv, srv.KeyFile, srv.KnownHostsFile, hostdOver(t.TempDir())))
			if fault == "kill" {
				srv.Kill()
			} else {
				srv.Cut()
			}
			res := waitResult(t, s)
			if res.Pause.Reason != "failed" || res.Pause.Err == nil ||
				!strings.Contains(res.Pause.Err.Error(), "the agent's host failed: host ssh "+srv.User+"@"+srv.Addr+": connection to the host lost") {
				t.Fatalf("pause %+v", res.Pause)
			}
			// Nothing is left on the far side.
			testsupport.WaitGone(t, hostdPid, "the hostd")
			testsupport.WaitGone(t, agent, "the agent")
		})
	}
}

func TestH2_SSHBadKeyOrUnknownHostKeyIsAClearError(t *testing.T) {
	srv := sshtest.Start(t)
	otherKey := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", otherKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	emptyKnown := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(emptyKnown, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, expr, want string }{
		{"key", sshHost(srv, otherKey, srv.KnownHostsFile, ""), "Permission denied (publickey"},
		{"host-key", sshHost(srv, srv.KeyFile, emptyKnown, ""), "Host key verification failed."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, map[string]string{
				"blaise.star": agentStarted + `setup(use("./p.star"))`,
				"p.star": `plug(name = "p")
def on_session(ctx, next):
    ` + tc.expr + `.fs.exists("x")
`,
			})
			res := c.run(chain.Options{}, nil)
			want := "fs.exists: x: host ssh " + srv.User + "@" + srv.Addr + ": connect: the far side closed the stream before the handshake (the command exited with code 255; its stderr ends with: "
			if res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), want) || !strings.Contains(res.Pause.Err.Error(), tc.want) {
				t.Fatalf("pause %+v\nwant %s…%s", res.Pause, want, tc.want)
			}
		})
	}
}

func TestH2_SSHShipsTheExecutable(t *testing.T) {
	cache, work := t.TempDir(), t.TempDir()
	srv := sshtest.Start(t, sshtest.Env("XDG_CACHE_HOME="+cache))
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./switch.star"), use("./exe.star"))`,
		"switch.star": switchPlug(sshHost(srv, srv.KeyFile, srv.KnownHostsFile, `, ship = True, workspace = "`+work+`"`)),
		"exe.star": `plug(name = "exe")
def on_session(ctx, next):
    print("EXE", ctx.host.exec(["sh", "-c", "readlink /proc/$PPID/exe"]).stdout.strip())
    print("PWD", ctx.host.exec(["pwd"]).stdout.strip())
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v\n%s", res.Pause, c.logs.String())
	}
	shipped, _ := filepath.Glob(filepath.Join(cache, "blaise-agent", "*", "blaise-agent"))
	if len(shipped) != 1 {
		t.Fatalf("cached: %v", shipped)
	}
	// The hostd that ran was the shipped copy.
	if got := strings.Join(c.lines("EXE "), "|"); got != shipped[0] {
		t.Fatalf("hostd ran %q, not the shipped %s", got, shipped[0])
	}
	// It works in the workspace given.
	if got := strings.Join(c.lines("PWD "), "|"); got != work {
		t.Fatalf("hostd worked in %q, not in %s", got, work)
	}
}
