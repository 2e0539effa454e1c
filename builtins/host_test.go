package builtins_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// hostStarPrelude defines helpers for the snippets.
const hostStarPrelude = `
def eq(got, want):
    if got != want:
        fail("got %r, want %r" % (got, want))
`

// hostTestEnv is a local host in a temporary workspace and a way to run
// Starlark against it.
type hostTestEnv struct {
	t    *testing.T
	ws   string
	host *hosts.Local
	ctx  context.Context
}

func newHostTestEnv(t *testing.T) *hostTestEnv {
	t.Helper()
	ws := t.TempDir()
	h := hosts.NewLocal(hosts.LocalOptions{Workspace: ws})
	t.Cleanup(func() { h.Close() })
	return &hostTestEnv{t: t, ws: ws, host: h, ctx: context.Background()}
}

// run executes src with host, ws and the prelude predeclared, holding a
// session lock as the runner does.
func (e *hostTestEnv) run(src string) error {
	return e.runWith(src, nil)
}

func (e *hostTestEnv) runWith(src string, lock *builtins.Lock) error {
	e.t.Helper()
	thread := &starlark.Thread{Name: e.t.Name(), Print: func(_ *starlark.Thread, msg string) { e.t.Log(msg) }}
	if lock == nil {
		lock = &builtins.Lock{}
	}
	lock.Acquire()
	defer lock.Release()
	builtins.BindThread(thread, lock, e.ctx, nil)
	predeclared := starlark.StringDict{
		"host": builtins.NewHost(e.host, "local"),
		"ws":   starlark.String(e.ws),
	}
	opts := &syntax.FileOptions{TopLevelControl: true, GlobalReassign: true, While: true}
	_, err := starlark.ExecFileOptions(opts, thread, "test.star", hostStarPrelude+src, predeclared)
	return err
}

// ok runs src and fails the test on error, with its backtrace.
func (e *hostTestEnv) ok(src string) {
	e.t.Helper()
	if err := e.run(src); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			e.t.Fatal(ee.Backtrace())
		}
		e.t.Fatal(err)
	}
}

// fails runs src and checks that it fails with exactly want.
func (e *hostTestEnv) fails(src, want string) {
	e.t.Helper()
	err := e.run(src)
	if err == nil {
		e.t.Errorf("%s: no error, want %q", src, want)
		return
	}
	if err.Error() != want {
		e.t.Errorf("%s:\n got error %q\nwant error %q", src, err.Error(), want)
	}
	for _, goName := range []string{"*hosts", "[]string", "*builtins", "starlark."} {
		if strings.Contains(err.Error(), goName) {
			t := e.t
			t.Errorf("error %q shows a Go type name", err)
		}
	}
}

func TestHost_Types(t *testing.T) {
	e := newHostTestEnv(t)
	e.ok(`
eq(type(host), "host")
eq(type(host.fs), "fs")
eq(type(host.info), "host_info")
eq(type(host.exec(["true"])), "exec_result")
eq(type(host.fs.stat(ws)), "file_info")
p = host.spawn(["true"])
eq(type(p), "process")
p.wait()
eq(dir(host), ["exec", "fs", "info", "spawn"])
`)
}

func TestHost_Info(t *testing.T) {
	e := newHostTestEnv(t)
	info, err := e.host.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.ok(`
i = host.info
eq(i.kind, "local")
eq(i.os, "` + info.OS + `")
eq(i.home, "` + info.Home + `")
eq(i.tmpdir, "` + info.Tmpdir + `")
eq(i.workspace, ws)
eq(i.persistent, True)
eq(host.info == i, True)
`)
	e.fails(`host.info.kind = "x"`, "can't assign to .kind field of host_info")
	e.fails(`host.info.nope`, "host_info has no .nope field or method")
	e.fails(`host.nope`, "host has no .nope field or method")
	e.fails(`host.inf`, "host has no .inf field or method (did you mean .info?)")
	e.fails(`host.forward`, "host local cannot forward ports")
}

func TestHost_InfoErrorSurfaces(t *testing.T) {
	e := newHostTestEnv(t)
	e.host.Close()
	e.fails(`host.info`, "host local: info: host closed")
}

func TestHostFS_AllCalls(t *testing.T) {
	e := newHostTestEnv(t)
	e.ok(`
fs = host.fs
fs.write_file("a.txt", "alpha")
eq(fs.read_file("a.txt"), "alpha")
eq(fs.read_file(ws + "/a.txt"), "alpha")
fs.write_file("b.bin", b"\x00\x01", mode = 0o600)
eq(fs.stat("b.bin").mode, 0o600)
eq(fs.stat("b.bin").size, 2)

fs.mkdir("d")
fs.mkdir("p/q/r", recursive = True)
fs.mkdir("p/q/r", recursive = True)
fs.mkdir("private", mode = 0o700)
eq(fs.stat("private").mode, 0o700)
fs.write_file("d/z", "")
fs.write_file("d/y", "")
fs.mkdir("d/x")
eq(fs.readdir("d"), ["x", "y", "z"])

st = fs.stat("a.txt")
eq(st.name, "a.txt")
eq(st.size, 5)
eq(st.is_file, True)
eq(st.is_dir, False)
eq(st.is_symlink, False)
eq(type(st.mtime), "float")
eq(fs.stat("d").is_dir, True)

fs.symlink("a.txt", "link")
eq(fs.readlink("link"), "a.txt")
eq(fs.stat("link").is_symlink, False)
eq(fs.stat("link").is_file, True)
eq(fs.lstat("link").is_symlink, True)
eq(fs.lstat("link").is_file, False)

eq(fs.exists("a.txt"), True)
eq(fs.exists("d"), True)
eq(fs.exists("missing"), False)

fs.chmod("a.txt", 0o640)
eq(fs.stat("a.txt").mode, 0o640)

fs.rename("a.txt", "d/moved.txt")
eq(fs.exists("a.txt"), False)
eq(fs.read_file("d/moved.txt"), "alpha")

t = fs.mkdtemp("blaise-")
eq(fs.stat(t).is_dir, True)
eq(t.split("/")[-1].startswith("blaise-"), True)
fs.rm(t, recursive = True)
t2 = fs.mkdtemp("t-", dir = "d")
eq(t2.startswith(ws + "/d/t-"), True)

fs.rm("missing", force = True)
fs.rm("link")
fs.rm("d", recursive = True)
eq(fs.exists("d"), False)
eq(fs.exists("d/moved.txt"), False)
`)
	// The same files, seen by Go.
	if b, err := os.ReadFile(filepath.Join(e.ws, "b.bin")); err != nil || string(b) != "\x00\x01" {
		t.Errorf("b.bin = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(e.ws, "p/q/r")); err != nil || !fi.IsDir() {
		t.Errorf("p/q/r: %v", err)
	}
}

func TestHostFS_Errors(t *testing.T) {
	e := newHostTestEnv(t)
	os.WriteFile(filepath.Join(e.ws, "file"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(e.ws, "dir"), 0o755)
	for _, tc := range []struct{ src, want string }{
		{`host.fs.read_file("/nope")`, "fs.read_file: /nope: no such file or directory"},
		{`host.fs.read_file("dir")`, "fs.read_file: dir: is a directory"},
		{`host.fs.write_file("no/such/file", "x")`, "fs.write_file: no/such/file: no such file or directory"},
		{`host.fs.mkdir("dir")`, "fs.mkdir: dir: file exists"},
		{`host.fs.mkdir("a/b")`, "fs.mkdir: a/b: no such file or directory"},
		{`host.fs.readdir("file")`, "fs.readdir: file: not a directory"},
		{`host.fs.stat("missing")`, "fs.stat: missing: no such file or directory"},
		{`host.fs.lstat("missing")`, "fs.lstat: missing: no such file or directory"},
		{`host.fs.rm("missing")`, "fs.rm: missing: no such file or directory"},
		{`host.fs.rm("dir")`, "fs.rm: dir: is a directory"},
		{`host.fs.rename("missing", "x")`, "fs.rename: missing -> x: no such file or directory"},
		{`host.fs.mkdtemp("x-", dir = "/nonexistent")`, "fs.mkdtemp: /nonexistent/x-: no such file or directory"},
		{`host.fs.symlink("x", "file")`, "fs.symlink: file: file exists"},
		{`host.fs.readlink("file")`, "fs.readlink: file: invalid argument"},
		{`host.fs.chmod("missing", 0o644)`, "fs.chmod: missing: no such file or directory"},
		{`host.fs.read_file("")`, `fs.read_file: "": empty path`},
		// Wrong arguments.
		{`host.fs.read_file(1)`, "fs.read_file: for parameter path: got int, want string"},
		{`host.fs.read_file()`, "fs.read_file: missing argument for path"},
		{`host.fs.write_file("f", 1)`, "fs.write_file: data: want string or bytes, got int"},
		{`host.fs.chmod("file", 0o10000)`, "fs.chmod: mode: want 0 to 0o7777, got 010000"},
		{`host.fs.mkdir("d", recursive = "yes")`, "fs.mkdir: for parameter \"recursive\": got string, want bool"},
		{`host.fs.mkdtemp("x-", dir = 3)`, "fs.mkdtemp: dir: want string or None, got int"},
		{`host.fs.nope`, "fs has no .nope field or method"},
		{`host.fs.readfile`, "fs has no .readfile field or method (did you mean .read_file?)"},
	} {
		e.fails(tc.src, tc.want)
	}
}

func TestHostExec(t *testing.T) {
	e := newHostTestEnv(t)
	os.Mkdir(filepath.Join(e.ws, "sub"), 0o755)
	e.ok(`
r = host.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
eq(r.code, 3)
eq(r.stdout, "out\n")
eq(r.stderr, "err\n")
eq(r.timed_out, False)

eq(host.exec(("echo", "tuple")).stdout, "tuple\n")
eq(host.exec(["cat"], stdin = "piped").stdout, "piped")
eq(host.exec(["sh", "-c", "echo $FOO"], env = {"FOO": "bar"}).stdout, "bar\n")
eq(host.exec(["sh", "-c", "basename $(pwd)"], cwd = "sub").stdout, "sub\n")
eq(host.exec(["true"], check = True).code, 0)

r = host.exec(["sleep", "10"], timeout = 0.2)
eq(r.timed_out, True)
eq(r.code, -1)
r = host.exec(["sleep", "0"], timeout = 5)
eq(r.timed_out, False)
`)
}

func TestHostExec_Errors(t *testing.T) {
	e := newHostTestEnv(t)
	for _, tc := range []struct{ src, want string }{
		{`host.exec("ls")`, "exec: argv: want list of strings, got string"},
		{`host.exec(["ls", 1])`, "exec: argv[1]: want string, got int"},
		{`host.exec([])`, "exec: argv: must not be empty"},
		{`host.exec(["ls"], env = ["A=b"])`, "exec: env: want dict of strings, got list"},
		{`host.exec(["ls"], env = {"A": 1})`, `exec: env["A"]: want string, got int`},
		{`host.exec(["ls"], cwd = 1)`, "exec: cwd: want string or None, got int"},
		{`host.exec(["ls"], stdin = 1)`, "exec: stdin: want string or bytes, got int"},
		{`host.exec(["ls"], timeout = "1")`, "exec: timeout: want seconds as int or float, got string"},
		{`host.exec(["ls"], timeout = -1)`, "exec: timeout: want a positive number of seconds, got -1"},
		{`host.exec(["ls"], check = 1)`, "exec: for parameter \"check\": got int, want bool"},
		{`host.exec(["ls"], bogus = 1)`, "exec: unexpected keyword argument \"bogus\""},
		{`host.exec(["nosuch-program-xyz"])`, `exec "nosuch-program-xyz": executable file not found in $PATH`},
		{`host.exec(["ls"], cwd = "/nonexistent")`, `exec "ls": cwd /nonexistent: no such file or directory`},
		{`host.exec(["sh", "-c", "echo one >&2; echo two >&2; exit 3"], check = True)`,
			"exec sh -c 'echo one >&2; echo two >&2; exit 3': exit code 3; stderr:\n  one\n  two"},
		{`host.exec(["false"], check = True)`, "exec false: exit code 1"},
		{`host.exec(["sleep", "10"], timeout = 0.1, check = True)`, "exec sleep 10: timed out after 100ms"},
		{`host.spawn("sleep")`, "spawn: argv: want list of strings, got string"},
		{`host.spawn(["nosuch-program-xyz"])`, `spawn: exec "nosuch-program-xyz": executable file not found in $PATH`},
	} {
		e.fails(tc.src, tc.want)
	}
}

// TestExecOnStdoutStreamsLines checks that on_stdout sees each line
// while the command still runs: the command goes on only once the
// callback of its first line created a file, so that without streaming it
// would time out with lines unseen.
func TestExecOnStdoutStreamsLines(t *testing.T) {
	e := newHostTestEnv(t)
	e.ok(`
seen = []
def line(l):
    seen.append(l)
    if l == "one":
        host.fs.write_file("go", "")
r = host.exec(["sh", "-c", "echo one; until [ -e go ]; do sleep 0.01; done; printf 'two\\nthree'"], timeout = 30, on_stdout = line)
eq(r.timed_out, False)
eq(seen, ["one", "two", "three"])
eq(r.stdout, "one\ntwo\nthree")
`)
	e.fails(`host.exec(["sh", "-c", "echo one; echo two"], on_stdout = lambda l: fail("no " + l))`, "exec: on_stdout: fail: no one")
}

func TestHostExec_CheckShowsLastLines(t *testing.T) {
	e := newHostTestEnv(t)
	err := e.run(`host.exec(["sh", "-c", "for i in $(seq 1 30); do echo line$i >&2; done; exit 2"], check = True)`)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "exit code 2") || !strings.Contains(msg, "line30") || !strings.Contains(msg, "line21") || strings.Contains(msg, "line20\n") {
		t.Errorf("error %q", msg)
	}
}

func TestHostSpawn(t *testing.T) {
	e := newHostTestEnv(t)
	e.ok(`
p = host.spawn(["sh", "-c", 'echo ready; while read l; do echo "got $l"; done; echo bye >&2; printf tail; exit 4'])
eq(p.pid > 0, True)
eq(p.read_line(), "ready")
p.write("one\n")
eq(p.read_line(), "got one")
p.write(b"two\nthree\n")
eq(p.read_line(), "got two")
p.close_stdin()
p.close_stdin()
eq(p.read_all(), "got three\ntail")
eq(p.read_line(), None)
eq(p.read_all(), "")
eq(p.wait(), 4)
eq(p.wait(), 4)
eq(p.stderr(), "bye\n")
p.kill()

q = host.spawn(["sh", "-c", "echo $X; pwd; sleep 100"], env = {"X": "x"}, cwd = ws)
eq(q.read_line(), "x")
eq(q.read_line(), ws)
q.kill()
eq(q.wait(), -1)

s = host.spawn(["sh", "-c", "trap 'exit 9' TERM; echo ready; while :; do sleep 0.05; done"])
eq(s.read_line(), "ready")
s.signal("TERM")
eq(s.wait(), 9)
`)
	e.fails(`
p = host.spawn(["sleep", "100"])
p.signal("BOGUS")
`, `process.signal: signal "BOGUS": unknown signal (want TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP or CONT)`)
	e.fails(`
p = host.spawn(["true"])
p.wait()
p.close_stdin()
p.write("x")
`, "process.write: stdin is closed")
	e.fails(`host.spawn(["true"]).nope`, "process has no .nope field or method")
	e.fails(`host.spawn(["true"]).wait(1)`, "process.wait: got 1 arguments, want at most 0")
}

func TestHostSpawn_ClosedHostEndsReads(t *testing.T) {
	e := newHostTestEnv(t)
	go func() {
		time.Sleep(200 * time.Millisecond)
		e.host.Close()
	}()
	e.ok(`
p = host.spawn(["sleep", "100"])
eq(p.read_line(), None)
eq(p.wait(), -1)
`)
}

// TestHost_BlockingReleasesLock checks that exec and reads release the
// session lock while they wait, so other handlers can run.
func TestHost_BlockingReleasesLock(t *testing.T) {
	e := newHostTestEnv(t)
	lock := &builtins.Lock{}
	for _, src := range []string{
		`host.exec(["sleep", "0.3"])`,
		`host.spawn(["sh", "-c", "sleep 0.3; echo done"]).read_line()`,
		`host.spawn(["sleep", "0.3"]).wait()`,
	} {
		var wg sync.WaitGroup
		started := make(chan struct{})
		wg.Go(func() {
			close(started)
			if err := e.runWith(src, lock); err != nil {
				t.Error(err)
			}
		})
		<-started
		time.Sleep(100 * time.Millisecond) // the snippet is waiting now
		got := make(chan struct{})
		go func() {
			lock.Acquire()
			lock.Release()
			close(got)
		}()
		select {
		case <-got:
		case <-time.After(150 * time.Millisecond):
			t.Errorf("%s holds the session lock while it waits", src)
		}
		wg.Wait()
	}
}

// TestHost_ContextCancelsBlockingCalls checks that the thread's context
// bounds exec and reads.
func TestHost_ContextCancelsBlockingCalls(t *testing.T) {
	e := newHostTestEnv(t)
	for _, tc := range []struct{ src, want string }{
		{`host.exec(["sleep", "100"])`, `exec "sleep": context deadline exceeded`},
		{`host.spawn(["sleep", "100"]).read_line()`, "process.read_line: context deadline exceeded"},
		{`host.spawn(["sleep", "100"]).wait()`, "process.wait: context deadline exceeded"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		e.ctx = ctx
		start := time.Now()
		e.fails(tc.src, tc.want)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v", tc.src, d)
		}
		cancel()
	}
}

// fakeForwarder is a host that can forward ports.
type fakeForwarder struct {
	*hosts.Local
	got hosts.ForwardSpec
}

func (f *fakeForwarder) Forward(ctx context.Context, spec hosts.ForwardSpec) (string, io.Closer, error) {
	f.got = spec
	if spec.RemoteAddr == "bad" {
		return "", nil, errors.New("no route to bad")
	}
	return "127.0.0.1:4242", io.NopCloser(nil), nil
}

func TestHost_Forward(t *testing.T) {
	ws := t.TempDir()
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: ws})
	defer local.Close()
	fw := &fakeForwarder{Local: local}
	thread := &starlark.Thread{Name: "forward"}
	predeclared := starlark.StringDict{"host": builtins.NewHost(fw, "remote")}
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "f.star", hostStarPrelude+`
eq("forward" in dir(host), True)
f = host.forward("127.0.0.1:3000")
eq(f.address, "127.0.0.1:4242")
eq(f.remote, "127.0.0.1:3000")
eq(f.close(), None)
`, predeclared)
	if err != nil {
		t.Fatal(err)
	}
	if fw.got != (hosts.ForwardSpec{LocalAddr: "127.0.0.1:0", RemoteAddr: "127.0.0.1:3000"}) {
		t.Errorf("spec = %+v", fw.got)
	}
	_, err = starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "f.star", `host.forward("bad", local = "127.0.0.1:9")`, predeclared)
	if err == nil || err.Error() != "forward: no route to bad" {
		t.Errorf("error %v", err)
	}
}
