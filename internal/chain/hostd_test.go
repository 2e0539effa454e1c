package chain_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// hostdMain is `blaise-agent hostd` played by the test binary.
func hostdMain(args []string) int {
	fl := flag.NewFlagSet("hostd", flag.ContinueOnError)
	ws := fl.String("workspace", "", "")
	claim := fl.Int("claim-protocol-version", 0, "")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	l := log.NewWithOptions(os.Stderr, log.Options{Prefix: "hostd"})
	if err := hostd.ServeStdio(context.Background(), *ws, hostd.ServeOptions{Log: l, ClaimVersion: *claim}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// relayMain runs `hostd args…` as a child and copies the streams between
// it and its own stdio, writing its pid to $RELAY_PID: killing the relay
// cuts the stream while both ends live on.
func relayMain(args []string) int {
	cmd := exec.Command(os.Args[0], append([]string{"hostd"}, args...)...)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.WriteFile(os.Getenv("RELAY_PID"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	go func() { io.Copy(in, os.Stdin); in.Close() }()
	io.Copy(os.Stdout, out)
	cmd.Wait()
	return 0
}

// hostdArgv is the Starlark list that starts the test binary as hostd in
// workspace.
func hostdArgv(workspace string, extra ...string) string {
	argv := append([]string{os.Args[0], "hostd", "--workspace", workspace}, extra...)
	b, _ := json.Marshal(argv)
	return string(b)
}

// switchPlug moves everything inside it to the host made by expr.
func switchPlug(expr string) string {
	return `plug(name = "switch")
def on_session(ctx, next):
    info = next(host = ` + expr + `)
    print("SWITCH", info.reason, info.error)
`
}

// hostdPidPlug prints the pid of the hostd serving ctx.host: the parent of
// a shell it runs.
const hostdPidPlug = `plug(name = "pid")
def on_session(ctx, next):
    print("HOSTD", ctx.host.exec(["sh", "-c", "echo $PPID"]).stdout.strip())
    next()
`

// pidFrom returns the number logged after marker.
func pidFrom(t *testing.T, c *fixture, marker string) int {
	t.Helper()
	lines := c.lines(marker)
	if len(lines) == 0 {
		t.Fatalf("no %q in the logs:\n%s", marker, c.logs.String())
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatalf("%s%q: %v", marker, lines[0], err)
	}
	return pid
}

func TestC6_HostdCommandRunsInnerPlugsAndTheAgentThere(t *testing.T) {
	other := t.TempDir()
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./switch.star"), use("./pid.star"), use("./inner.star"))`,
		"switch.star": switchPlug(`hosts.command(` + hostdArgv(other) + `)`),
		"pid.star":    hostdPidPlug,
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    i = ctx.host.info
    print("HINFO", i.kind, i.workspace, i.os, i.persistent, i.home != "", i.tmpdir != "")
    print("PWD", ctx.host.exec(["pwd"]).stdout.strip())
    ctx.host.fs.write_file("made-here", "x")
    print("LIST", ctx.host.fs.readdir("."))
    print("RUNNER", ctx.runner.info.kind, ctx.runner.info.workspace)
    print("MISSING", ctx.host.fs.exists("nope"))
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v\n%s", res.Pause, c.logs.String())
	}
	wd, _ := os.Getwd()
	for marker, want := range map[string]string{
		"HINFO ":   "command " + other + " linux True True True",
		"PWD ":     other,
		"LIST ":    `["made-here"]`,
		"RUNNER ":  "local " + wd,
		"MISSING ": "False",
		"SWITCH ":  "idle None",
	} {
		if got := strings.Join(c.lines(marker), "|"); got != want {
			t.Errorf("%s: got %q, want %q", marker, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "made-here")); err != nil {
		t.Errorf("the file was not made on the host: %v", err)
	}
	// The agent ran there: it is the hostd's child, and it is gone with it.
	testsupport.WaitGone(t, pidFrom(t, c, "HOSTD "), "the hostd after next() returned")
}

// turn runs one session with the demo agent, the switch plug sw (none:
// local) and a turn, and returns the transcript without times.
func turn(t *testing.T, sw string, cwd string) []acp.Record {
	files := map[string]string{"blaise.star": demoAgent("demo") + `setup(use("./tracer.star"))`, "tracer.star": tracer("a")}
	if sw != "" {
		files["blaise.star"] = demoAgent("demo") + `setup(use("./switch.star"), use("./tracer.star"))`
		files["switch.star"] = sw
	}
	s := startSession(t, files, chain.Options{})
	sid := s.Open(cwd)
	s.Turn(3, sid, "hello\n/think hmm\n/tool grep\n/big 40\nbye")
	s.Turn(4, sid, "again")
	recs := s.recorded()
	for i := range recs {
		recs[i].Time = time.Time{}
	}
	return recs
}

func TestM1_ATurnThroughAHostdEqualsTheSameTurnLocally(t *testing.T) {
	cwd := t.TempDir()
	local := turn(t, "", cwd)
	remote := turn(t, switchPlug(`hosts.command(`+hostdArgv(t.TempDir())+`)`), cwd)
	compareRecords(t, local, remote)
}

// compareRecords fails unless two transcripts are the same.
func compareRecords(t *testing.T, local, remote []acp.Record) {
	t.Helper()
	if len(local) < 8 || len(local) != len(remote) {
		t.Fatalf("%d records locally, %d remotely", len(local), len(remote))
	}
	for i := range local {
		l, _ := json.Marshal(local[i])
		r, _ := json.Marshal(remote[i])
		if string(l) != string(r) {
			t.Fatalf("record %d differs:\nlocal  %s\nremote %s", i, l, r)
		}
	}
}

func TestC3_KillingTheHostdMidTurnPausesFailedWithTheCause(t *testing.T) {
	s, pid, agent := turnOnAFarHost(t, `hosts.command(`+hostdArgv(t.TempDir())+`)`)
	syscall.Kill(pid, syscall.SIGKILL)
	res := waitResult(t, s)
	if res.Pause.Reason != "failed" || res.Pause.Err == nil ||
		!strings.Contains(res.Pause.Err.Error(), "the agent's host failed: host command ") ||
		!strings.Contains(res.Pause.Err.Error(), "connection to the host lost") {
		t.Fatalf("pause %+v", res.Pause)
	}
	testsupport.WaitGone(t, agent, "the agent of the killed hostd")
}

func TestC3_CuttingTheStreamPausesFailedAndEndsBothSides(t *testing.T) {
	relayPid := filepath.Join(t.TempDir(), "relay.pid")
	argv, _ := json.Marshal([]string{os.Args[0], "relay", "--workspace", t.TempDir()})
	s, hostdPid, agent := turnOnAFarHost(t, `hosts.command(`+string(argv)+`, env = {"RELAY_PID": "`+relayPid+`"})`)
	b, err := os.ReadFile(relayPid)
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := strconv.Atoi(string(b))
	syscall.Kill(rp, syscall.SIGKILL)
	res := waitResult(t, s)
	if res.Pause.Reason != "failed" || res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), "connection to the host lost") {
		t.Fatalf("pause %+v", res.Pause)
	}
	testsupport.WaitGone(t, hostdPid, "the hostd whose stream was cut")
	testsupport.WaitGone(t, agent, "the agent of the cut hostd")
}

// turnOnAFarHost starts a session whose agent runs on the host that expr
// makes, and a long turn there; it returns the session, the pid of the
// hostd and that of its agent.
func turnOnAFarHost(t *testing.T, expr string) (s *proxySession, hostdPid, agentPid int) {
	t.Helper()
	s = startSession(t, map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./switch.star"), use("./pid.star"))`,
		"switch.star": switchPlug(expr),
		"pid.star":    hostdPidPlug,
	}, chain.Options{})
	sid := s.Open(t.TempDir())
	hostdPid = pidFrom(t, s.c, "HOSTD ")
	agentPid = childOf(t, hostdPid)
	s.Prompt(3, sid, "started\n/sleep 30000")
	s.Until(func(m *acp.Message) bool { return m.Method == "session/update" }) // the turn is under way
	return s, hostdPid, agentPid
}

// childOf returns the pid of a child of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var kids []int
	testsupport.Eventually(t, fmt.Sprintf("a child of process %d", pid), func() bool {
		kids = testsupport.Children(pid)
		return len(kids) > 0
	})
	return kids[0]
}

func TestH2_HostFailuresAreClearErrorsInThePlug(t *testing.T) {
	for _, tc := range []struct {
		name, expr, want string
	}{
		{"version", `hosts.command(` + hostdArgv(".", "--claim-protocol-version", "2") + `)`,
			`connect: hostd protocol version mismatch: this side speaks blaise-hostd 1, the far side blaise-hostd 2`},
		{"missing", `hosts.command(["no-such-transport-x"])`,
			`exec: host command no-such-transport-x: connect: spawn: exec "no-such-transport-x": executable file not found in $PATH`},
		{"exit255", `hosts.command(["sh", "-c", "echo 'Permission denied (publickey).' >&2; exit 255"])`,
			`exec: host command sh -c 'echo '\''Permission denied (publickey).'\'' >&2; exit 255': connect: the far side closed the stream before the handshake (the command exited with code 255; its stderr ends with: Permission denied (publickey).)`},
		{"not-hostd", `hosts.command(["echo", "hello"])`,
			`exec: host command echo hello: connect: the far side does not speak the hostd protocol: it said "hello"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, map[string]string{
				"blaise.star": agentStarted + `setup(use("./p.star"))`,
				"p.star": `plug(name = "p")
def on_session(ctx, next):
    h = ` + tc.expr + `
    h.exec(["true"])
    next()
`,
			})
			res := c.run(chain.Options{}, nil)
			if res.Pause.Reason != "failed" || res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), tc.want) {
				t.Fatalf("pause %+v\nwant error containing %s", res.Pause, tc.want)
			}
		})
	}
}

func TestH2_AnAgentOnAHostThatFailsToConnectFailsTheRun(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./switch.star"))`,
		"switch.star": switchPlug(`hosts.command(["sh", "-c", "echo no hostd here >&2; exit 127"])`),
	})
	res := c.run(chain.Options{}, nil)
	want := "the agent failed to start: host command sh -c 'echo no hostd here >&2; exit 127': connect: the far side closed the stream before the handshake (the command exited with code 127; its stderr ends with: no hostd here)"
	if res.Pause.Reason != "failed" || res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), want) {
		t.Fatalf("pause %+v\nwant %s", res.Pause, want)
	}
	// The plug saw the same pause from next().
	if got := strings.Join(c.lines("SWITCH "), "|"); !strings.HasPrefix(got, "failed ") {
		t.Fatalf("next() returned %q", got)
	}
}

func TestC6_ACallOnAHostClosedByItsNextFails(t *testing.T) {
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    h = hosts.command(` + hostdArgv(".") + `)
    next(host = h)
    h.fs.read_file("x")
`,
	})
	res := c.run(chain.Options{}, idle)
	want := "fs.read_file: x: host command " + os.Args[0] + " hostd --workspace .: host closed"
	if res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), want) {
		t.Fatalf("pause %+v\nwant %s", res.Pause, want)
	}
}

func TestH2_ShipSendsThisExecutableOnceAndRunsItAsHostd(t *testing.T) {
	cache := t.TempDir()
	other := t.TempDir()
	plug := `plug(name = "p")
def on_session(ctx, next):
    h = hosts.command(["sh"], ship = True, env = {"XDG_CACHE_HOME": "` + cache + `", "PATH": "` + os.Getenv("PATH") + `"})
    print("PWD", h.exec(["pwd"], cwd = "` + other + `").stdout.strip())
    next()
`
	for range 2 {
		c := newChain(t, map[string]string{"blaise.star": agentStarted + `setup(use("./p.star"))`, "p.star": plug})
		res := c.run(chain.Options{}, idle)
		if res.Pause.Reason != "idle" || strings.Join(c.lines("PWD "), "") != other {
			t.Fatalf("pause %+v, pwd %q\n%s", res.Pause, c.lines("PWD "), c.logs.String())
		}
	}
	shipped, _ := filepath.Glob(filepath.Join(cache, "blaise-agent", "*", "blaise-agent"))
	if len(shipped) != 1 {
		t.Fatalf("cached: %v", shipped)
	}
	a, _ := os.Stat(shipped[0])
	b, _ := os.Stat(os.Args[0])
	if a.Size() != b.Size() {
		t.Fatalf("shipped %d bytes of %d", a.Size(), b.Size())
	}
}

// With workspace, the shipped hostd works there; one that is not a
// directory on the far side is a clear error.
func TestH2_ShipRunsHostdInTheWorkspaceGiven(t *testing.T) {
	cache, work := t.TempDir(), t.TempDir()
	missing := filepath.Join(work, "missing")
	for _, tc := range []struct {
		workspace, want string
	}{
		{work, ""},
		{missing, "stat " + missing + ": no such file or directory"},
	} {
		c := newChain(t, map[string]string{
			"blaise.star": agentStarted + `setup(use("./p.star"))`,
			"p.star": `plug(name = "p")
def on_session(ctx, next):
    h = hosts.command(["sh"], ship = True, workspace = "` + tc.workspace + `", env = {"XDG_CACHE_HOME": "` + cache + `", "PATH": "` + os.Getenv("PATH") + `"})
    print("WS", h.info.workspace)
    print("PWD", h.exec(["pwd"]).stdout.strip())
    next()
`,
		})
		res := c.run(chain.Options{}, idle)
		if tc.want != "" {
			if res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), tc.want) {
				t.Fatalf("pause %+v\nwant …%s", res.Pause, tc.want)
			}
			continue
		}
		if res.Pause.Reason != "idle" || strings.Join(c.lines("WS "), "") != work || strings.Join(c.lines("PWD "), "") != work {
			t.Fatalf("pause %+v, workspace %q, pwd %q\n%s", res.Pause, c.lines("WS "), c.lines("PWD "), c.logs.String())
		}
	}
}

func TestH2_ShipRefusesAFarSideOfAnotherPlatform(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "uname"), []byte("#!/bin/sh\necho Darwin arm64\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./p.star"))`,
		"p.star": `plug(name = "p")
def on_session(ctx, next):
    h = hosts.command(["sh"], ship = True, env = {"XDG_CACHE_HOME": "` + t.TempDir() + `", "PATH": "` + bin + ":" + os.Getenv("PATH") + `"})
    h.exec(["true"])
`,
	})
	res := c.run(chain.Options{}, nil)
	want := `connect: ship: the far side is "Darwin arm64", this executable is for linux/amd64`
	if res.Pause.Err == nil || !strings.Contains(res.Pause.Err.Error(), want) {
		t.Fatalf("pause %+v\nwant %s", res.Pause, want)
	}
}

func TestC6_AHostReachedThroughAnotherHost(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	c := newChain(t, map[string]string{
		"blaise.star": agentStarted + `setup(use("./switch.star"), use("./pid.star"), use("./chain.star"), use("./inner.star"))`,
		"switch.star": switchPlug(`hosts.command(` + hostdArgv(first) + `)`),
		"pid.star":    hostdPidPlug,
		"chain.star": `plug(name = "chain")
def on_session(ctx, next):
    next(host = hosts.command(` + hostdArgv(second) + `, via = ctx.host))
`,
		"inner.star": `plug(name = "inner")
def on_session(ctx, next):
    print("PWD", ctx.host.exec(["pwd"]).stdout.strip())
    print("PPPID", ctx.host.exec(["sh", "-c", "ps -o ppid= -p $PPID"]).stdout.strip())
    next()
`,
	})
	res := c.run(chain.Options{}, idle)
	if res.Pause.Reason != "idle" {
		t.Fatalf("pause %+v\n%s", res.Pause, c.logs.String())
	}
	if got := strings.Join(c.lines("PWD "), "|"); got != second {
		t.Errorf("inner plug ran in %q, want %q", got, second)
	}
	// The second hostd is a child of the first.
	firstPid := pidFrom(t, c, "HOSTD ")
	if got := pidFrom(t, c, "PPPID "); got != firstPid {
		t.Errorf("the second hostd's parent is %d, not the first hostd %d", got, firstPid)
	}
	testsupport.WaitGone(t, firstPid, "the first hostd")
}
