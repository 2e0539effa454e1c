package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// serverLab is a real `blaise-agent serve` on loopback with an API token
// and an agent "demo" of the demo agent, and what tests start around it:
// runners (`listen`) and clients (`acp --server`).
type serverLab struct {
	t     testing.TB
	bin   string
	dir   string
	data  string
	db    string // "": SQLite in data
	url   string
	token string
	serve *exec.Cmd
	logs  *testsupport.Buffer
	lease time.Duration
	// serveArgs are more flags of serve.
	serveArgs []string
}

// newServerLab starts a server on db ("" for SQLite) with the lease, and
// creates the agent demo with settings.
func newServerLab(t testing.TB, db string, lease time.Duration, agentFlags ...string) *serverLab {
	t.Helper()
	return newServerLabWith(t, nil, db, lease, agentFlags...)
}

// newServerLabWith is newServerLab with more flags of serve.
func newServerLabWith(t testing.TB, serveArgs []string, db string, lease time.Duration, agentFlags ...string) *serverLab {
	t.Helper()
	l := &serverLab{t: t, bin: self(t), dir: t.TempDir(), db: db, lease: lease, serveArgs: serveArgs}
	l.start(agentFlags...)
	return l
}

// start starts the lab's server with l.bin, mints its API token and
// creates the agent demo with settings.
func (l *serverLab) start(agentFlags ...string) {
	l.t.Helper()
	l.data = filepath.Join(l.dir, "data")
	l.startServer("127.0.0.1:0")
	l.token = l.mint("api", "tests")
	l.cli(append([]string{"agents", "create", "demo", "--server", l.url, "--token", l.token}, agentFlags...)...)
	l.writeConfig("blaise.star", "")
}

func (l *serverLab) storeFlags() []string {
	f := []string{"--data", l.data}
	if l.db != "" {
		f = append(f, "--db", l.db)
	}
	return f
}

var servingURL = regexp.MustCompile(`url=(https?://\S+)`)

// startServer starts `serve` on addr and waits until it listens.
func (l *serverLab) startServer(addr string) {
	l.t.Helper()
	l.logs = &testsupport.Buffer{}
	args := append([]string{"serve", "--addr", addr, "--lease", l.lease.String(), "--log-level", "debug"}, l.storeFlags()...)
	args = append(args, l.serveArgs...)
	l.serve = exec.Command(l.bin, args...)
	l.serve.Stderr = l.logs
	if err := l.serve.Start(); err != nil {
		l.t.Fatal(err)
	}
	serve := l.serve
	l.t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if l.t.Failed() {
			l.t.Logf("serve:\n%s", l.logs)
		}
	})
	testsupport.Eventually(l.t, "the server listens", func() bool { return servingURL.MatchString(l.logs.String()) })
	l.url = servingURL.FindStringSubmatch(l.logs.String())[1]
}

// cli runs a command to its end and returns its output; it must succeed.
func (l *serverLab) cli(args ...string) string {
	l.t.Helper()
	out, err := exec.Command(l.bin, args...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("blaise-agent %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// writeCleaner writes a configuration with a plug that logs the reason of
// each teardown: "torn down reason=R".
func (l *serverLab) writeCleaner() {
	l.t.Helper()
	l.writeConfig("blaise.star", `setup(use("./teardown.star"))`+"\n")
	plug := "plug(name = \"cleaner\")\n\ndef on_teardown(ctx, next):\n    info = next()\n    ctx.log.info(\"torn down reason=%s\" % info.reason)\n"
	if err := os.WriteFile(filepath.Join(l.dir, "teardown.star"), []byte(plug), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// drain stops runner r with SIGTERM and waits until it has drained and
// exited: the server stopped its live runs as idle.
func (l *serverLab) drain(r *labRunner) {
	l.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		l.t.Fatal(err)
	}
	if err := r.cmd.Wait(); err != nil {
		l.t.Fatalf("listen after SIGTERM: %v\n%s", err, r.logs)
	}
}

// mint runs `tokens ARGS` on the server's store and returns the token it
// prints: its standard output is the token alone.
func (l *serverLab) mint(args ...string) string {
	l.t.Helper()
	cmd := exec.Command(l.bin, append(append([]string{"tokens"}, args...), l.storeFlags()...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("tokens %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	tok, ok := strings.CutSuffix(string(out), "\n")
	if !ok || strings.ContainsAny(tok, "\n# ") {
		l.t.Fatalf("tokens %s printed more than the token on stdout: %q", strings.Join(args, " "), out)
	}
	return tok
}

// writeConfig writes a runner's configuration around the demo agent, with
// more lines after it.
func (l *serverLab) writeConfig(name, more string) string {
	l.t.Helper()
	path := filepath.Join(l.dir, name)
	cfg := fmt.Sprintf("agent(command = %q, args = [\"demo-agent\", \"--state-dir\", %q])\n%s", l.bin, filepath.Join(l.dir, "demo"), more)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// labRunner is a `listen` process.
type labRunner struct {
	name string
	cmd  *exec.Cmd
	logs *testsupport.Buffer
}

// runner registers and starts a runner of demo with the configuration
// config, and waits until the server has it.
func (l *serverLab) runner(name, config string) *labRunner {
	l.t.Helper()
	r := l.startRunner(name, config)
	testsupport.Eventually(l.t, "runner "+name+" connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	return r
}

func (l *serverLab) startRunner(name, config string) *labRunner {
	l.t.Helper()
	return l.startRunnerVia(name, config, l.url)
}

// startRunnerVia starts a runner that reaches the server at url.
func (l *serverLab) startRunnerVia(name, config, url string) *labRunner {
	l.t.Helper()
	return l.launchRunner(name, config, url, l.mint("registration"))
}

// startRunnerWith starts a runner that registers with the token reg, and
// waits until the server has it.
func (l *serverLab) startRunnerWith(name, config, reg string) *labRunner {
	l.t.Helper()
	r := l.launchRunner(name, config, l.url, reg)
	testsupport.Eventually(l.t, "runner "+name+" connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	return r
}

// launchRunner starts `listen` as runner name of demo, reaching the server
// at url, registering with reg.
func (l *serverLab) launchRunner(name, config, url, reg string) *labRunner {
	l.t.Helper()
	r := &labRunner{name: name, logs: &testsupport.Buffer{}}
	r.cmd = exec.Command(l.bin, "listen", "-c", filepath.Join(l.dir, config), "--server", url, "--agent", "demo", "--name", name,
		"--credential", filepath.Join(l.dir, name+".credential"), "--register-token", reg, "--log-level", "debug")
	r.cmd.Dir = l.dir
	r.cmd.Stderr = r.logs
	if err := r.cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		if l.t.Failed() {
			l.t.Logf("runner %s:\n%s", name, r.logs)
		}
	})
	return r
}

// client starts `acp --server` and returns a raw ACP client of it.
func (l *serverLab) client() *acpProc {
	l.t.Helper()
	cmd := exec.Command(l.bin, "acp", "--server", l.url, "--agent", "demo")
	cmd.Env = append(os.Environ(), "BLAISE_TOKEN="+l.token)
	return startACP(l.t, cmd, l.dir, func() string { return "server:\n" + l.logs.String() })
}

// open starts a client and opens an ACP session of the agent.
func (l *serverLab) open() (*acpProc, string) {
	l.t.Helper()
	c := l.client()
	c.Initialize(`{}`)
	return c, c.NewSession(l.dir)
}

// openAfter opens a session as open does and has its first turn, prompt,
// answered.
func (l *serverLab) openAfter(prompt string) (*acpProc, string) {
	l.t.Helper()
	c, sid := l.open()
	if _, resp := c.Turn(2, sid, prompt); resp.Error != nil {
		l.t.Fatalf("turn: %s", resp.Raw)
	}
	return c, sid
}

// sessions lists the server's sessions through `sessions --server --json`.
func (l *serverLab) sessions() []*lifecycle.Record {
	l.t.Helper()
	var recs []*lifecycle.Record
	out := l.cli("sessions", "--server", l.url, "--token", l.token, "--json", "--all")
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		l.t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	return recs
}

func (l *serverLab) session(id string) *lifecycle.Record {
	l.t.Helper()
	for _, r := range l.sessions() {
		if r.ID == id {
			return r
		}
	}
	l.t.Fatalf("no session %s on the server", id)
	return nil
}

// endToEnd is the server's end-to-end check on one store: a server, two
// runners, a client through acp --server: start, prompt, idle pause,
// resume on the next prompt, sessions end → teardown closed.
func endToEnd(t *testing.T, db string) {
	l := newServerLab(t, db, 2*time.Second, "--idle-policy", "pause", "--inactivity-limit", "1s")
	l.runner("r1", "blaise.star")
	l.runner("r2", "blaise.star")
	c, sid := l.open()
	ms, resp := c.Turn(2, sid, "hello")
	if resp.Error != nil || !strings.Contains(acptest.Texts(t, sid, ms), "echo: hello") {
		t.Fatalf("first turn: %s %s", acptest.Texts(t, sid, ms), resp.Raw)
	}
	var id string
	testsupport.Eventually(t, "the session pauses idle", func() bool {
		recs := l.sessions()
		if len(recs) != 1 {
			return false
		}
		id = recs[0].ID
		return recs[0].State == lifecycle.Paused
	})
	rec := l.session(id)
	if rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle || !rec.Pause.MayResume || rec.AgentName != "demo" || rec.Runner == "" {
		t.Fatalf("paused session: %+v", rec)
	}
	first := rec.Runner
	ms, resp = c.Turn(3, sid, "again")
	if resp.Error != nil || !strings.Contains(acptest.Texts(t, sid, ms), "echo: again") {
		t.Fatalf("turn after the pause: %s %s", acptest.Texts(t, sid, ms), resp.Raw)
	}
	rec = l.session(id)
	if rec.Runs != 2 || rec.Runner != first {
		t.Fatalf("after the resume: runs %d on %s, want 2 on %s (the session resumes on its runner)", rec.Runs, rec.Runner, first)
	}
	testsupport.Eventually(t, "the session pauses again", func() bool { return l.session(id).State == lifecycle.Paused })
	out := l.cli("sessions", "end", "--server", l.url, "--token", l.token, id)
	if !strings.Contains(out, "ended (closed)") {
		t.Fatalf("sessions end: %s", out)
	}
	if rec = l.session(id); rec.State != lifecycle.Ended || rec.EndReason != lifecycle.Closed {
		t.Fatalf("after sessions end: %+v", rec)
	}
	// Ended again: said so, and nothing more is asked of the server.
	if out := l.cli("sessions", "end", "--server", l.url, "--token", l.token, id); !strings.Contains(out, "session "+id+" had ended already (closed)") {
		t.Fatalf("sessions end of an ended session: %s", out)
	}
}

// TestServerEndToEndOnSQLite: serve + two listen runners + acp --server,
// on SQLite.
func TestServerEndToEndOnSQLite(t *testing.T) { t.Parallel(); endToEnd(t, "") }

// TestServerEndToEndOnPostgreSQL: the same on a real PostgreSQL.
func TestServerEndToEndOnPostgreSQL(t *testing.T) { t.Parallel(); endToEnd(t, pgtest.DSN(t)) }

// writeCounter writes a configuration with a plug that counts the runs
// of its session in persisted state and logs the count.
func (l *serverLab) writeCounter() {
	l.t.Helper()
	l.writeConfig("blaise.star", `setup(use("./counter.star", id = "c"))`+"\n")
	plug := `plug(name = "counter", persisted = schema.object(n = schema.int()))

def on_session(ctx, next):
    v = ctx.persisted.value
    n = (v.n if v else 0) + 1
    ctx.persisted.set({"n": n})
    ctx.log.info("counted run=%d kind=%s" % (n, ctx.run.kind))
    next()
`
	if err := os.WriteFile(filepath.Join(l.dir, "counter.star"), []byte(plug), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// TestL5_RunnerKilledMidTurn: kill -9 of a runner mid-turn. A stop to the
// session while no runner has its run is an error and changes nothing
// (L3); the run fails after the lease (L5); nothing acknowledged is lost,
// and the session resumes on a runner that is back.
func TestL5_RunnerKilledMidTurn(t *testing.T) {
	t.Parallel()
	// A lease long enough for the stop below to come before it ends.
	l := newServerLab(t, "", 10*time.Second, "--idle-policy", "pause")
	l.writeCounter()
	r1 := l.runner("r1", "blaise.star")
	c, sid := l.open()
	c.Prompt(2, sid, "/sleep 600000")
	testsupport.Eventually(t, "the turn runs", func() bool { return strings.Contains(r1.logs.String(), "counted run=1") })
	recs := l.sessions()
	if len(recs) != 1 {
		t.Fatalf("sessions: %d", len(recs))
	}
	id := recs[0].ID
	if err := r1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = r1.cmd.Wait()
	before := l.session(id)
	out, err := exec.Command(l.bin, "sessions", "end", "--server", l.url, "--token", l.token, id).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no run receives the stop") {
		t.Fatalf("sessions end with the runner gone: %v %s", err, out)
	}
	if after := l.session(id); after.State != lifecycle.Active || after.Stop != nil || after.Runs != before.Runs {
		t.Fatalf("a stop no runner received changed the session: %+v", after)
	}
	// The turn ends with the run; the session pauses as failed after the lease.
	c.Until(acptest.ResponseTo("2"))
	testsupport.Eventually(t, "the run fails after the lease", func() bool { return l.session(id).State == lifecycle.Paused })
	rec := l.session(id)
	if rec.Pause == nil || rec.Pause.Reason != lifecycle.Failed || !rec.Pause.MayResume || !strings.Contains(rec.Pause.Error, "runner r1 is gone") {
		t.Fatalf("after the lease: %+v", rec.Pause)
	}
	r2 := l.runner("r2", "blaise.star")
	ms, resp := c.Turn(3, sid, "back")
	if resp.Error != nil || !strings.Contains(acptest.Texts(t, sid, ms), "echo: back") {
		t.Fatalf("turn on the new runner: %s %s", acptest.Texts(t, sid, ms), resp.Raw)
	}
	// The first run's acknowledged write was kept: this is its second run.
	if !strings.Contains(r2.logs.String(), "counted run=2 kind=resume") {
		t.Fatalf("runner r2 did not resume the session with its state:\n%s", r2.logs)
	}
	if rec = l.session(id); rec.Runner != "r2" {
		t.Fatalf("resumed on %q, want r2", rec.Runner)
	}
}

// TestL8_ListenRefusesAPlugThatCannotResume: under the pause policy, a
// runner whose configuration has a plug that cannot resume refuses to
// start, naming the plug.
func TestL8_ListenRefusesAPlugThatCannotResume(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.writeConfig("fragile.star", `setup(use("./fragile_plug.star"))`+"\n")
	if err := os.WriteFile(filepath.Join(l.dir, "fragile_plug.star"), []byte("plug(name = \"fragile\", resumable = False)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := l.startRunner("r1", "fragile.star")
	err := r.cmd.Wait()
	if err == nil || !strings.Contains(r.logs.String(), "cannot resume: fragile") {
		t.Fatalf("listen: %v\n%s", err, r.logs)
	}
	// Under the end policy the same runner is welcome.
	l.cli("agents", "set", "demo", "--server", l.url, "--token", l.token, "--idle-policy", "end")
	l.runner("r2", "fragile.star")
}

// TestWrongOrRevokedTokenIsRefused: a wrong API token, a revoked one and a
// revoked runner credential are refused, and change nothing.
func TestWrongOrRevokedTokenIsRefused(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second)
	out, err := exec.Command(l.bin, "sessions", "--server", l.url, "--token", "bla_wrong").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Fatalf("a wrong token: %v %s", err, out)
	}
	other := l.mint("api", "other")
	l.cli("sessions", "--server", l.url, "--token", other)
	list := l.cli(append([]string{"tokens", "list"}, l.storeFlags()...)...)
	m := regexp.MustCompile(`(?m)^api\s+(\S+)\s+other\s`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("tokens list has no token of other:\n%s", list)
	}
	l.cli(append([]string{"tokens", "revoke", m[1]}, l.storeFlags()...)...)
	out, err = exec.Command(l.bin, "agents", "create", "x", "--server", l.url, "--token", other).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Fatalf("a revoked token: %v %s", err, out)
	}
	if agents := l.cli("agents", "--server", l.url, "--token", l.token); strings.Contains(agents, "x ") {
		t.Fatalf("a revoked token created an agent:\n%s", agents)
	}
	// A revoked runner credential: the runner is refused and leaves.
	r := l.runner("r1", "blaise.star")
	list = l.cli(append([]string{"tokens", "list"}, l.storeFlags()...)...)
	m = regexp.MustCompile(`(?m)^runner\s+(\S+)\s+r1\s`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("tokens list has no runner r1:\n%s", list)
	}
	l.cli(append([]string{"tokens", "revoke", m[1]}, l.storeFlags()...)...)
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	again := exec.Command(l.bin, "listen", "-c", filepath.Join(l.dir, "blaise.star"), "--server", l.url, "--agent", "demo", "--name", "r1",
		"--credential", filepath.Join(l.dir, "r1.credential"))
	out, err = again.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused") {
		t.Fatalf("listen with a revoked credential: %v %s", err, out)
	}
	// With a new registration token, the runner registers again in place
	// of the revoked credential, and connects.
	r = l.startRunnerWith("r1", "blaise.star", l.mint("registration"))
	if !strings.Contains(r.logs.String(), "the server refused the runner's credential; registering again with --register-token") {
		t.Fatalf("listen --register-token with a revoked credential:\n%s", r.logs)
	}
}

// TestListenDrainsOnSIGTERM: a runner told to stop takes no more
// runs, the server stops its live runs as idle (they pause), then it
// exits.
func TestListenDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	r := l.runner("r1", "blaise.star")
	l.openAfter("hello")
	id := l.sessions()[0].ID
	l.drain(r)
	rec := l.session(id)
	if rec.State != lifecycle.Paused || rec.Pause == nil || rec.Pause.Reason != lifecycle.Idle || !rec.Pause.MayResume {
		t.Fatalf("after the drain: %s %+v", rec.State, rec.Pause)
	}
	if !strings.Contains(r.logs.String(), "draining") {
		t.Fatalf("listen did not drain:\n%s", r.logs)
	}
}

// TestServerRestartAdoptsRuns: the server is killed while a
// session runs and started again; its runner reconnects and hands the run
// back, and the server takes it over: the session goes on in the same run
// (no second run), with the client that loads it again. No acknowledged
// persisted write is lost: once the run has paused, the next one counts on
// from it.
func TestServerRestartAdoptsRuns(t *testing.T) {
	t.Parallel()
	// A lease the runner's reconnection fits in, under the race detector.
	l := newServerLab(t, "", 5*time.Second, "--idle-policy", "pause")
	l.writeCounter()
	r := l.runner("r1", "blaise.star")
	c, sid := l.openAfter("hello")
	id := l.sessions()[0].ID
	addr := strings.TrimPrefix(l.url, "http://")
	if err := l.serve.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = l.serve.Wait()
	_ = c.cmd.Wait() // acp --server ends with its connection
	reconnects := strings.Count(r.logs.String(), "connected server=")
	l.startServer(addr)
	testsupport.Eventually(t, "the runner reconnects", func() bool { return strings.Count(r.logs.String(), "connected server=") > reconnects })
	if strings.Contains(r.logs.String(), "does not have the run any more") {
		t.Fatalf("the run was not adopted:\nserve:\n%s\nrunner:\n%s", l.logs, r.logs)
	}
	testsupport.Eventually(t, "the server adopts the run", func() bool { return strings.Contains(l.logs.String(), "run adopted after a restart") })
	c = l.client()
	c.Initialize(`{}`)
	c.LoadSession(3, sid, l.dir)
	c.Until(acptest.ResponseTo("3"))
	ms, resp := c.Turn(4, sid, "again")
	if resp.Error != nil || !strings.Contains(acptest.Texts(t, sid, ms), "echo: again") {
		t.Fatalf("turn after the restart: %s %s", acptest.Texts(t, sid, ms), resp.Raw)
	}
	if rec := l.session(id); rec.State != lifecycle.Active || rec.Runs != 1 {
		t.Fatalf("after the restart: %s with %d runs, want active in run 1", rec.State, rec.Runs)
	}
	// The client leaves: the run pauses as idle (L9), its own pause.
	c.in.Close()
	_ = c.cmd.Wait()
	testsupport.Eventually(t, "the session pauses", func() bool { return l.session(id).State == lifecycle.Paused })
	if rec := l.session(id); rec.Runs != 1 || rec.Pause.Reason != lifecycle.Idle {
		t.Fatalf("paused: run %d, pause %+v; want run 1 paused idle", rec.Runs, rec.Pause)
	}
	c = l.client()
	c.Initialize(`{}`)
	c.LoadSession(5, sid, l.dir)
	c.Until(acptest.ResponseTo("5"))
	if !strings.Contains(r.logs.String(), "counted run=2 kind=resume") {
		t.Fatalf("the session did not resume with its state:\n%s", r.logs)
	}
}

// TestRunThroughTheServer: run --server starts a session of the
// agent on a runner and leaves it paused; run --session continues it and,
// with --end, ends it.
func TestRunThroughTheServer(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	out := l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello there")
	if !strings.Contains(out, "echo: hello there") {
		t.Fatalf("run --server:\n%s", out)
	}
	recs := l.sessions()
	if len(recs) != 1 || recs[0].State != lifecycle.Paused {
		t.Fatalf("after run --server: %+v", recs)
	}
	id := recs[0].ID
	out = l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "--session", id, "--end", "more")
	if !strings.Contains(out, "echo: more") || !strings.Contains(out, "ended (closed)") {
		t.Fatalf("run --server --session --end:\n%s", out)
	}
	if rec := l.session(id); rec.State != lifecycle.Ended || rec.Runs != 2 {
		t.Fatalf("after --end: %s, %d runs", rec.State, rec.Runs)
	}
}

// TestServerServesTLSToClientsThatTrustIt: with --tls-cert and --tls-key the server serves TLS; a
// client trusts its certificate through SSL_CERT_FILE, and refuses it
// otherwise.
func TestServerServesTLSToClientsThatTrustIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, cert, key)
	l := &serverLab{t: t, bin: self(t), dir: t.TempDir(), lease: time.Minute, serveArgs: []string{"--tls-cert", cert, "--tls-key", key}}
	l.data = filepath.Join(l.dir, "data")
	l.startServer("127.0.0.1:0")
	if !strings.HasPrefix(l.url, "https://") {
		t.Fatalf("url %s, want https", l.url)
	}
	l.token = l.mint("api", "tests")
	agents := exec.Command(l.bin, "agents", "create", "demo", "--server", l.url, "--token", l.token)
	agents.Env = append(os.Environ(), "SSL_CERT_FILE="+cert)
	if out, err := agents.CombinedOutput(); err != nil {
		t.Fatalf("agents create over TLS: %v\n%s", err, out)
	}
	untrusted := exec.Command(l.bin, "agents", "--server", l.url, "--token", l.token)
	untrusted.Env = append(os.Environ(), "SSL_CERT_FILE="+filepath.Join(dir, "none.pem"))
	if out, err := untrusted.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Fatalf("a client that does not trust the certificate: %v %s", err, out)
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "blaise test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestL8_NoTokenReachesARun: a runner given its registration token and an
// API token in its environment passes neither, nor its credential, to the
// session process, its plugs' processes or the agent: not in their
// environment, not on their command line.
func TestL8_NoTokenReachesARun(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	reg := l.mint("registration")
	r := &labRunner{name: "r1", logs: &testsupport.Buffer{}}
	r.cmd = exec.Command(l.bin, "listen", "-c", filepath.Join(l.dir, "blaise.star"), "--server", l.url, "--agent", "demo", "--name", "r1",
		"--credential", filepath.Join(l.dir, "r1.credential"))
	r.cmd.Env = append(os.Environ(), "BLAISE_REGISTER_TOKEN="+reg, "BLAISE_TOKEN="+l.token)
	r.cmd.Dir, r.cmd.Stderr = l.dir, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
	testsupport.Eventually(t, "the runner connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	cred, err := os.ReadFile(filepath.Join(l.dir, "r1.credential"))
	if err != nil {
		t.Fatal(err)
	}
	c, sid := l.open()
	c.Prompt(2, sid, "/sleep 600000")
	var procs []int
	testsupport.Eventually(t, "the session process and its agent run", func() bool {
		procs = descendants(r.cmd.Process.Pid)[1:] // below the runner
		return len(procs) >= 2
	})
	secrets := []string{reg, l.token, strings.TrimSpace(string(cred))}
	for _, pid := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err != nil {
				continue // gone meanwhile
			}
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					t.Errorf("process %d (%s) has a token in its %s", pid, strings.ReplaceAll(string(b[:min(len(b), 80)]), "\x00", " "), f)
				}
			}
		}
	}
}

// TestServerGoneLeavesNoProcess: when the server goes away while a
// run streams and does not adopt the run within the lease, the runner
// stops the run, and neither the session process nor the agent is left
// behind, blocked on output no one reads.
func TestServerGoneLeavesNoProcess(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second)
	cfg := fmt.Sprintf("agent(command = %q, env = {\"BLAISE_TEST_AGENT\": \"flood\"})\n", l.bin)
	if err := os.WriteFile(filepath.Join(l.dir, "flood.star"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := l.runner("r1", "flood.star")
	c, sid := l.open()
	c.Prompt(2, sid, "100000000") // far more than the pipes hold: the run blocks on its output
	c.Next()                      // the stream has begun
	var procs []int
	testsupport.Eventually(t, "the session process and its agent run", func() bool {
		procs = descendants(r.cmd.Process.Pid)[1:]
		return len(procs) >= 2
	})
	if err := l.serve.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range procs {
		testsupport.WaitGone(t, pid, fmt.Sprintf("process %d of the run", pid))
	}
}

// cutter is a TCP proxy to the server whose connections a test cuts, as a
// network would, or first turns into a black hole: what is sent through
// them is read and dropped, as by a network that went away.
type cutter struct {
	ln        net.Listener
	mu        sync.Mutex
	pairs     []*proxied
	swallowed atomic.Int64 // bytes from the runner dropped
}

type proxied struct {
	in, out net.Conn
	hole    atomic.Bool
}

func newCutter(t testing.TB, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutter{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c := &proxied{in: in, out: out}
			p.mu.Lock()
			p.pairs = append(p.pairs, c)
			p.mu.Unlock()
			go p.copy(c, out, in, &p.swallowed)
			go p.copy(c, in, out, nil)
		}
	}()
	return p
}

// copy passes src on to dst, or drops it while the pair is a black hole.
func (p *cutter) copy(c *proxied, dst, src net.Conn, dropped *atomic.Int64) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if c.hole.Load() {
				if dropped != nil {
					dropped.Add(int64(n))
				}
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutter) url() string { return "http://" + p.ln.Addr().String() }

// blackhole makes the connections through the proxy drop what they carry.
func (p *cutter) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.pairs {
		c.hole.Store(true)
	}
}

// cut closes the connections through the proxy; new ones pass again.
func (p *cutter) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.pairs {
		c.in.Close()
		c.out.Close()
	}
	p.pairs = nil
}

// TestRunnerReconnectsAndKeepsItsRuns: a runner whose connection
// breaks reconnects, and the server takes its live run back: the session
// goes on in the same run, neither lost nor started twice.
func TestRunnerReconnectsAndKeepsItsRuns(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	l.writeCounter()
	proxy := newCutter(t, strings.TrimPrefix(l.url, "http://"))
	r := l.startRunnerVia("r1", "blaise.star", proxy.url())
	testsupport.Eventually(t, "the runner connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	c, sid := l.open()
	if _, resp := c.Turn(2, sid, "before"); resp.Error != nil {
		t.Fatalf("turn: %s", resp.Raw)
	}
	proxy.cut()
	testsupport.Eventually(t, "the run is re-attached", func() bool { return strings.Contains(r.logs.String(), "run re-attached") })
	ms, resp := c.Turn(3, sid, "after")
	if resp.Error != nil || !strings.Contains(acptest.Texts(t, sid, ms), "echo: after") {
		t.Fatalf("turn after the reconnection: %s %s", acptest.Texts(t, sid, ms), resp.Raw)
	}
	rec := l.sessions()[0]
	if rec.State != lifecycle.Active || rec.Runs != 1 || rec.Pause != nil {
		t.Fatalf("after the reconnection: %s, %d runs, pause %+v; want the same run going on", rec.State, rec.Runs, rec.Pause)
	}
	if n := strings.Count(r.logs.String(), "counted run="); n != 1 {
		t.Fatalf("the plugs attached %d times, want once:\n%s", n, r.logs)
	}
}

// TestL6_TheServerTearsDownAnExpiredSession: a paused session whose
// lifetime passed gets a teardown run with reason expired from the
// server's own timers, on a runner, with no sweep.
func TestL6_TheServerTearsDownAnExpiredSession(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause", "--inactivity-limit", "1s", "--paused-lifetime", "2s")
	l.writeCleaner()
	r := l.runner("r1", "blaise.star")
	l.openAfter("hello")
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the session expires and ends", func() bool { return l.session(id).State == lifecycle.Ended })
	if rec := l.session(id); rec.EndReason != lifecycle.Expired {
		t.Fatalf("ended with %s, want expired", rec.EndReason)
	}
	if !strings.Contains(r.logs.String(), "torn down reason=expired") {
		t.Fatalf("the teardown did not run on the runner:\n%s", r.logs)
	}
}

// TestL2_TheServerRetriesAFailedTeardownThenOrphans: a teardown that keeps
// failing on the runner is retried by the server's timers, then the
// session is orphaned; resolving it ends it.
func TestL2_TheServerRetriesAFailedTeardownThenOrphans(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause", "--teardown-backoff", "100ms", "--teardown-attempts", "3")
	l.writeConfig("blaise.star", `setup(use("./stuck.star"))`+"\n")
	plug := "plug(name = \"stuck\")\n\ndef on_teardown(ctx, next):\n    next()\n    fail(\"the volume is busy\")\n"
	if err := os.WriteFile(filepath.Join(l.dir, "stuck.star"), []byte(plug), 0o644); err != nil {
		t.Fatal(err)
	}
	l.runner("r1", "blaise.star")
	l.openAfter("hello")
	id := l.sessions()[0].ID
	// The first teardown fails: sessions end says so, and the server
	// retries it.
	out, err := exec.Command(l.bin, "sessions", "end", "--server", l.url, "--token", l.token, id).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tearing_down") {
		t.Fatalf("sessions end: %v %s", err, out)
	}
	testsupport.Eventually(t, "the session is orphaned", func() bool { return l.session(id).State == lifecycle.Orphaned })
	rec := l.session(id)
	if rec.Teardown.Attempts != rec.Settings.TeardownAttempts || !strings.Contains(rec.Teardown.LastError, "the volume is busy") {
		t.Fatalf("orphaned after %d of %d attempts: %q", rec.Teardown.Attempts, rec.Settings.TeardownAttempts, rec.Teardown.LastError)
	}
	l.cli("sessions", "resolve", "--server", l.url, "--token", l.token, id)
	if rec = l.session(id); rec.State != lifecycle.Ended {
		t.Fatalf("after resolve: %s", rec.State)
	}
}

// TestShowAndLogAServersSession: sessions show and log with
// --server show a server's session: its record, its runs and its
// transcript as run renders it.
func TestShowAndLogAServersSession(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second, "--idle-policy", "pause")
	l.runner("r1", "blaise.star")
	l.cli("run", "--server", l.url, "--token", l.token, "--agent", "demo", "hello there")
	id := l.sessions()[0].ID
	show := l.cli("sessions", "show", id, "--server", l.url, "--token", l.token)
	for _, want := range []string{"session " + id, "paused", "runner:", "r1", "demo"} {
		if !strings.Contains(show, want) {
			t.Fatalf("sessions show --server lacks %q:\n%s", want, show)
		}
	}
	log := l.cli("sessions", "log", id, "--server", l.url, "--token", l.token)
	if !strings.Contains(log, "hello there") || !strings.Contains(log, "echo: hello there") {
		t.Fatalf("sessions log --server:\n%s", log)
	}
	records := l.cli("sessions", "log", id, "--json", "--server", l.url, "--token", l.token)
	if n := strings.Count(records, "\n"); n < 4 || !strings.Contains(records, `"session/prompt"`) {
		t.Fatalf("sessions log --json --server: %d records\n%s", n, records)
	}
}

// TestL5_TheServerFailsARunThatIgnoresItsTimeout: a run whose plug holds it
// past its timeout stop is killed on its runner after the lease and failed;
// a timeout ends the session (L4). The stop grace of serve bounds how long
// the killed run takes to go.
func TestL5_TheServerFailsARunThatIgnoresItsTimeout(t *testing.T) {
	l := newServerLabWith(t, []string{"--stop-grace", "1s"}, "", time.Second, "--idle-policy", "pause", "--timeout", "2s")
	l.writeConfig("blaise.star", `setup(use("./stubborn.star"))`+"\n")
	plug := "plug(name = \"stubborn\")\n\ndef on_session(ctx, next):\n    next()\n    ctx.runner.exec([\"sleep\", \"600\"])\n"
	if err := os.WriteFile(filepath.Join(l.dir, "stubborn.star"), []byte(plug), 0o644); err != nil {
		t.Fatal(err)
	}
	r := l.runner("r1", "blaise.star")
	l.open()
	id := l.sessions()[0].ID
	testsupport.Eventually(t, "the run is failed and the session over", func() bool {
		rec := l.session(id)
		return rec.State == lifecycle.Ended || rec.State == lifecycle.Orphaned
	})
	rec := l.session(id)
	if rec.Stop == nil || rec.Stop.Reason != lifecycle.Timeout || rec.Pause == nil || rec.Pause.Reason != lifecycle.Failed {
		t.Fatalf("stop %+v pause %+v, want a timeout stop and a failed run", rec.Stop, rec.Pause)
	}
	testsupport.Eventually(t, "the runner has no process of the run", func() bool { return len(descendants(r.cmd.Process.Pid)) == 1 })
}

// TestARefusedRunnerLeavesNoProcess: a runner whose credential was
// revoked while it had a live run is refused when it reconnects; it stops
// the run and exits, and no process of the run outlives it.
func TestARefusedRunnerLeavesNoProcess(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", time.Minute, "--idle-policy", "pause")
	proxy := newCutter(t, strings.TrimPrefix(l.url, "http://"))
	r := l.startRunnerVia("r1", "blaise.star", proxy.url())
	testsupport.Eventually(t, "the runner connects", func() bool { return strings.Contains(r.logs.String(), "connected") })
	c, sid := l.open()
	c.Prompt(2, sid, "/sleep 600000")
	var procs []int
	testsupport.Eventually(t, "the run's processes", func() bool {
		procs = descendants(r.cmd.Process.Pid)[1:]
		return len(procs) >= 2
	})
	list := l.cli(append([]string{"tokens", "list"}, l.storeFlags()...)...)
	m := regexp.MustCompile(`(?m)^runner\s+(\S+)\s+r1\s`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("no runner r1 in:\n%s", list)
	}
	l.cli(append([]string{"tokens", "revoke", m[1]}, l.storeFlags()...)...)
	proxy.cut()
	err := r.cmd.Wait()
	if err == nil || !strings.Contains(r.logs.String(), "refused") {
		t.Fatalf("listen after its credential was revoked: %v\n%s", err, r.logs)
	}
	for _, pid := range procs {
		testsupport.WaitGone(t, pid, fmt.Sprintf("process %d of the run", pid))
	}
}

// TestAServerRefusesATakenAddressOrStoreAtItsStart: serve on an address in
// use names the flag, and a second serve on a running server's data (with
// its own address) is refused at its start, not at its first append; in
// both, nothing is made (a port in use leaves no new data directory) and
// no setup token is printed.
func TestAServerRefusesATakenAddressOrStoreAtItsStart(t *testing.T) {
	t.Parallel()
	l := newServerLab(t, "", 2*time.Second)
	u, err := url.Parse(l.url)
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", u.Host, "--data", fresh}, "--addr: listen tcp " + u.Host},
		{[]string{"--addr", "127.0.0.1:0", "--metrics-addr", u.Host, "--data", fresh}, "--metrics-addr: listen tcp " + u.Host},
		{append([]string{"--addr", "127.0.0.1:0"}, l.storeFlags()...), "another store appends to it"},
	} {
		out, err := exec.Command(l.bin, append([]string{"serve"}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "setup token") || strings.Contains(string(out), "serving") {
			t.Errorf("serve %s: %v\n%s\nwant %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a serve refused its address made its data directory: %v", err)
	}
	// The first server goes on.
	l.cli("sessions", "--server", l.url, "--token", l.token)
}

// TestMetricsAddrServesTheMetricsAlone: --metrics-addr serves /metrics
// without a token, and nothing else: a client pointed at it by mistake
// gets a 404, not the metrics in place of what it asked for.
func TestMetricsAddrServesTheMetricsAlone(t *testing.T) {
	t.Parallel()
	l := newServerLabWith(t, []string{"--metrics-addr", "127.0.0.1:0"}, "", 2*time.Second)
	served := regexp.MustCompile(`serving metrics url=(http://\S+)`)
	testsupport.Eventually(t, "the metrics are served", func() bool { return served.MatchString(l.logs.String()) })
	m := served.FindStringSubmatch(l.logs.String())
	get := func(path string) (int, string) {
		resp, err := http.Get(m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "blaise_signin_failures_total 0") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	for _, path := range []string{"/", "/v1/sessions", "/v1/runner/connect"} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("%s on the metrics' address: %d, want 404", path, code)
		}
	}
}
