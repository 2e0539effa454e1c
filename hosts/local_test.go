//go:build unix

package hosts

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// newTestLocal returns a local host whose workspace is a fresh directory,
// closed when the test ends.
func newTestLocal(t *testing.T) (*Local, string) {
	t.Helper()
	ws := t.TempDir()
	h := NewLocal(LocalOptions{Workspace: ws})
	t.Cleanup(func() { h.Close() })
	return h, ws
}

func TestInfo(t *testing.T) {
	h, ws := newTestLocal(t)
	info, err := h.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	want := Info{Kind: "local", OS: runtime.GOOS, Home: home, Tmpdir: os.TempDir(), Workspace: ws, Persistent: true}
	if info != want {
		t.Errorf("Info = %+v, want %+v", info, want)
	}
}

func TestNewLocalDefaults(t *testing.T) {
	h := NewLocal(LocalOptions{})
	defer h.Close()
	wd, _ := os.Getwd()
	if h.workspace != wd {
		t.Errorf("workspace = %q, want %q", h.workspace, wd)
	}
	if h.baseEnv["PATH"] != os.Getenv("PATH") {
		t.Errorf("base PATH = %q, want the runner's", h.baseEnv["PATH"])
	}
}

func TestExecCodeStdoutStderr(t *testing.T) {
	h, _ := newTestLocal(t)
	res, err := h.Exec(context.Background(), []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.TimedOut {
		t.Errorf("got %+v", res)
	}
	res, err = h.Exec(context.Background(), []string{"true"}, ExecOptions{})
	if err != nil || res.Code != 0 {
		t.Errorf("true: %+v, %v", res, err)
	}
}

func TestExecKilledBySignal(t *testing.T) {
	h, _ := newTestLocal(t)
	res, err := h.Exec(context.Background(), []string{"sh", "-c", "kill -9 $$"}, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != -1 || res.TimedOut {
		t.Errorf("got %+v, want code -1", res)
	}
}

func TestExecStdin(t *testing.T) {
	h, _ := newTestLocal(t)
	res, err := h.Exec(context.Background(), []string{"cat"}, ExecOptions{Stdin: []byte("hello\nworld")})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello\nworld" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	// Without stdin, the process reads end of file at once.
	res, err = h.Exec(context.Background(), []string{"cat"}, ExecOptions{Timeout: 5 * time.Second})
	if err != nil || res.TimedOut || len(res.Stdout) != 0 {
		t.Errorf("cat without stdin: %+v, %v", res, err)
	}
}

func TestExecEnvOverlay(t *testing.T) {
	ws := t.TempDir()
	h := NewLocal(LocalOptions{Workspace: ws, BaseEnv: map[string]string{
		"PATH": os.Getenv("PATH"), "A": "base-a", "B": "base-b",
	}})
	defer h.Close()
	res, err := h.Exec(context.Background(), []string{"sh", "-c", `echo "$A $B $C ${HOME-unset}"`},
		ExecOptions{Env: map[string]string{"B": "over-b", "C": "new-c"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "base-a over-b new-c unset\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	// The base is not changed by an overlay.
	res, _ = h.Exec(context.Background(), []string{"sh", "-c", `echo "$B"`}, ExecOptions{})
	if string(res.Stdout) != "base-b\n" {
		t.Errorf("base changed: %q", res.Stdout)
	}
}

func TestExecPathFromMergedEnv(t *testing.T) {
	h, ws := newTestLocal(t)
	bin := filepath.Join(ws, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "greet"), []byte("#!/bin/sh\necho hi from greet\n"), 0o755)
	if _, err := h.Exec(context.Background(), []string{"greet"}, ExecOptions{}); err == nil {
		t.Fatal("greet found without PATH")
	}
	res, err := h.Exec(context.Background(), []string{"greet"},
		ExecOptions{Env: map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hi from greet\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	// A name with a slash is relative to the working directory.
	res, err = h.Exec(context.Background(), []string{"./greet"}, ExecOptions{Dir: "bin"})
	if err != nil || string(res.Stdout) != "hi from greet\n" {
		t.Errorf("./greet: %+v, %v", res, err)
	}
}

func TestExecCwd(t *testing.T) {
	h, ws := newTestLocal(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(ws)
	for _, tc := range []struct{ dir, want string }{
		{"", real},
		{"sub", filepath.Join(real, "sub")},
		{filepath.Join(ws, "sub"), filepath.Join(real, "sub")},
	} {
		res, err := h.Exec(context.Background(), []string{"pwd", "-P"}, ExecOptions{Dir: tc.dir})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != tc.want {
			t.Errorf("dir %q: pwd = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

func TestExecCannotStart(t *testing.T) {
	h, ws := newTestLocal(t)
	os.WriteFile(filepath.Join(ws, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		argv []string
		dir  string
		want string
	}{
		{[]string{"nosuch-program-xyz"}, "", `exec "nosuch-program-xyz": executable file not found in $PATH`},
		{[]string{"./nosuch"}, "", `exec "./nosuch": no such file or directory`},
		{[]string{"./noexec"}, "", `exec "./noexec": permission denied`},
		{[]string{"true"}, "missing", `exec "true": cwd ` + filepath.Join(ws, "missing") + `: no such file or directory`},
		{nil, "", `exec: empty argv`},
	} {
		res, err := h.Exec(context.Background(), tc.argv, ExecOptions{Dir: tc.dir})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Exec(%q): error %v, want %q", tc.argv, err, tc.want)
		}
		if res.Code != -1 {
			t.Errorf("Exec(%q): code %d, want -1", tc.argv, res.Code)
		}
	}
}

func TestExecTimeoutKillsGrandchildren(t *testing.T) {
	h, ws := newTestLocal(t)
	pidfile := filepath.Join(ws, "pidfile")
	start := time.Now()
	res, err := h.Exec(context.Background(),
		[]string{"sh", "-c", "sleep 100 & echo $! > pidfile; echo started; wait"},
		ExecOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Code != -1 {
		t.Errorf("got %+v, want timed out with code -1", res)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("exec took %v", d)
	}
	testsupport.WaitGone(t, testsupport.ReadPid(t, pidfile), "the command")
}

func TestExecGrandchildHoldingStdout(t *testing.T) {
	h, ws := newTestLocal(t)
	// The grandchild leaves the process group and keeps stdout open; the
	// timeout kills the group, and exec must still return.
	script := `perl -e 'setpgrp(0,0); open(F, ">", "pidfile"); print F "$$\n"; close F; sleep 100' & wait`
	if _, err := h.Exec(context.Background(), []string{"perl", "-e", "1"}, ExecOptions{}); err != nil {
		t.Skip("needs perl:", err)
	}
	start := time.Now()
	res, err := h.Exec(context.Background(), []string{"sh", "-c", script}, ExecOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Errorf("got %+v, want timed out", res)
	}
	if d := time.Since(start); d > 300*time.Millisecond+execWaitDelay+2*time.Second {
		t.Errorf("exec took %v", d)
	}
	pid := testsupport.ReadPid(t, filepath.Join(ws, "pidfile"))
	syscall.Kill(pid, syscall.SIGKILL)
}

func TestExecKillsLeftoversOnExit(t *testing.T) {
	h, ws := newTestLocal(t)
	start := time.Now()
	res, err := h.Exec(context.Background(), []string{"sh", "-c", "sleep 100 & echo $! > pidfile; echo done"}, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "done\n" || res.Code != 0 {
		t.Errorf("got %+v", res)
	}
	if d := time.Since(start); d > execWaitDelay {
		t.Errorf("exec took %v; a background process holding stdout delayed it", d)
	}
	testsupport.WaitGone(t, testsupport.ReadPid(t, filepath.Join(ws, "pidfile")), "the command")
}

func TestExecContextCancel(t *testing.T) {
	h, ws := newTestLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := h.Exec(ctx, []string{"sh", "-c", "sleep 100 & echo $! > pidfile; wait"}, ExecOptions{})
	if err == nil || err.Error() != `exec "sh": context canceled` {
		t.Errorf("error = %v", err)
	}
	if res.Code != -1 {
		t.Errorf("code = %d", res.Code)
	}
	testsupport.WaitGone(t, testsupport.ReadPid(t, filepath.Join(ws, "pidfile")), "the command")
}

func TestSpawnPipesAndWait(t *testing.T) {
	h, _ := newTestLocal(t)
	p, err := h.Spawn(context.Background(), SpawnSpec{
		Argv: []string{"sh", "-c", `while read l; do echo "got $l"; done; echo bye >&2; exit 7`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 0 {
		t.Errorf("pid = %d", p.Pid())
	}
	out := bufio.NewReader(p.Stdout())
	for _, l := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin(), l+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "got "+l+"\n" {
			t.Fatalf("read %q, %v", line, err)
		}
	}
	p.Stdin().Close()
	errOut, err := io.ReadAll(p.Stderr())
	if err != nil || string(errOut) != "bye\n" {
		t.Errorf("stderr %q, %v", errOut, err)
	}
	// Wait from several goroutines, and again afterwards.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if code, err := p.Wait(); code != 7 || err != nil {
				t.Errorf("Wait = %d, %v", code, err)
			}
		})
	}
	wg.Wait()
	if code, err := p.Wait(); code != 7 || err != nil {
		t.Errorf("Wait = %d, %v", code, err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after exit: %v", err)
	}
	if err := p.Signal("TERM"); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("Signal after exit: %v", err)
	}
}

func TestSpawnEnvAndDir(t *testing.T) {
	h, ws := newTestLocal(t)
	os.Mkdir(filepath.Join(ws, "d"), 0o755)
	p, err := h.Spawn(context.Background(), SpawnSpec{
		Argv: []string{"sh", "-c", `echo "$X"; basename "$(pwd)"`},
		Dir:  "d",
		Env:  map[string]string{"X": "x-value"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if string(out) != "x-value\nd\n" {
		t.Errorf("stdout = %q", out)
	}
	if code, _ := p.Wait(); code != 0 {
		t.Errorf("code = %d", code)
	}
}

func TestSpawnCannotStart(t *testing.T) {
	h, _ := newTestLocal(t)
	_, err := h.Spawn(context.Background(), SpawnSpec{Argv: []string{"nosuch-program-xyz"}})
	if err == nil || err.Error() != `spawn: exec "nosuch-program-xyz": executable file not found in $PATH` {
		t.Errorf("error = %v", err)
	}
}

func TestSpawnKillKillsGroup(t *testing.T) {
	h, _ := newTestLocal(t)
	p, err := h.Spawn(context.Background(), SpawnSpec{Argv: []string{"sh", "-c", "sleep 100 & echo $!; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(line))
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != -1 || err != nil {
		t.Errorf("Wait = %d, %v", code, err)
	}
	testsupport.WaitGone(t, grandchild, "the grandchild")
	testsupport.WaitGone(t, p.Pid(), "the spawned process")
}

func TestSpawnSignal(t *testing.T) {
	h, _ := newTestLocal(t)
	p, err := h.Spawn(context.Background(), SpawnSpec{Argv: []string{"sh", "-c", `trap 'echo term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(p.Stdout())
	if l, _ := out.ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q", l)
	}
	if err := p.Signal("BOGUS"); err == nil || !strings.Contains(err.Error(), `signal "BOGUS": unknown signal`) {
		t.Errorf("Signal(BOGUS) = %v", err)
	}
	if err := p.Signal("TERM"); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Wait(); code != 3 {
		t.Errorf("code = %d, want 3", code)
	}
	if l, _ := out.ReadString('\n'); l != "term\n" {
		t.Errorf("read %q", l)
	}
}

func TestCloseKillsEverything(t *testing.T) {
	ws := t.TempDir()
	h := NewLocal(LocalOptions{Workspace: ws})
	var procs []Process
	for i := range 2 {
		p, err := h.Spawn(context.Background(), SpawnSpec{Argv: []string{"sh", "-c", "sleep 100 & echo $! > spawn" + strconv.Itoa(i) + "; wait"}})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	type result struct {
		res ExecResult
		err error
	}
	execDone := make(chan result, 1)
	go func() {
		res, err := h.Exec(context.Background(), []string{"sh", "-c", "sleep 100 & echo $! > execpid; wait"}, ExecOptions{})
		execDone <- result{res, err}
	}()
	pids := []int{testsupport.ReadPid(t, filepath.Join(ws, "spawn0")), testsupport.ReadPid(t, filepath.Join(ws, "spawn1")), testsupport.ReadPid(t, filepath.Join(ws, "execpid"))}

	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if code, _ := p.Wait(); code != -1 {
			t.Errorf("spawned process: code %d, want -1", code)
		}
		if testsupport.Alive(p.Pid()) {
			t.Errorf("spawned process %d alive after Close", p.Pid())
		}
	}
	select {
	case r := <-execDone:
		if r.err == nil || r.err.Error() != `exec "sh": host closed` || r.res.Code != -1 {
			t.Errorf("exec during Close: %+v, %v", r.res, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exec still running after Close")
	}
	for _, pid := range pids {
		testsupport.WaitGone(t, pid, "a process of the closed host")
	}

	// Everything fails afterwards.
	ctx := context.Background()
	if _, err := h.Info(ctx); !errors.Is(err, ErrClosed) || err.Error() != "host closed" {
		t.Errorf("Info after Close: %v", err)
	}
	if _, err := h.Exec(ctx, []string{"true"}, ExecOptions{}); err == nil || err.Error() != `exec "true": host closed` {
		t.Errorf("Exec after Close: %v", err)
	}
	if _, err := h.Spawn(ctx, SpawnSpec{Argv: []string{"true"}}); err == nil || err.Error() != `spawn "true": host closed` {
		t.Errorf("Spawn after Close: %v", err)
	}
	if _, err := h.FS().ReadFile(ctx, "x"); err == nil || err.Error() != "read_file x: host closed" {
		t.Errorf("ReadFile after Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestH1_LocalHostIsRealFileSystem(t *testing.T) {
	h, ws := newTestLocal(t)
	ctx := context.Background()
	// Written through the host, read by the OS.
	if err := h.FS().WriteFile(ctx, "via-host.txt", []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "via-host.txt"))
	if err != nil || string(b) != "from the host" {
		t.Errorf("os.ReadFile = %q, %v", b, err)
	}
	// Written by the OS, read through the host.
	abs := filepath.Join(ws, "via-os.txt")
	if err := os.WriteFile(abs, []byte("from the os"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"via-os.txt", abs} {
		b, err := h.FS().ReadFile(ctx, name)
		if err != nil || string(b) != "from the os" {
			t.Errorf("ReadFile(%q) = %q, %v", name, b, err)
		}
	}
	// And processes see the same files.
	res, err := h.Exec(ctx, []string{"cat", "via-host.txt", abs}, ExecOptions{})
	if err != nil || res.Code != 0 || string(res.Stdout) != "from the hostfrom the os" {
		t.Errorf("cat: %+v, %v", res, err)
	}
}

func TestFS(t *testing.T) {
	h, ws := newTestLocal(t)
	f := h.FS()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wantErr := func(err error, want string) {
		t.Helper()
		if err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	}

	// write_file / read_file
	must(f.WriteFile(ctx, "a.txt", []byte("alpha"), 0))
	fi, err := os.Stat(filepath.Join(ws, "a.txt"))
	must(err)
	if fi.Mode().Perm() != 0o644&^umask() {
		t.Errorf("default mode %v", fi.Mode().Perm())
	}
	must(f.WriteFile(ctx, "x.sh", []byte("x"), 0o700))
	fi, _ = os.Stat(filepath.Join(ws, "x.sh"))
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
	_, err = f.ReadFile(ctx, "missing.txt")
	wantErr(err, "read_file missing.txt: no such file or directory")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v is not fs.ErrNotExist", err)
	}
	_, err = f.ReadFile(ctx, ".")
	wantErr(err, "read_file .: is a directory")
	_, err = f.ReadFile(ctx, "")
	wantErr(err, `read_file "": empty path`)
	wantErr(f.WriteFile(ctx, "no/dir/file", nil, 0), "write_file no/dir/file: no such file or directory")

	// mkdir
	must(f.Mkdir(ctx, "d", 0, false))
	wantErr(f.Mkdir(ctx, "d", 0, false), "mkdir d: file exists")
	wantErr(f.Mkdir(ctx, "p/q/r", 0, false), "mkdir p/q/r: no such file or directory")
	must(f.Mkdir(ctx, "p/q/r", 0o700, true))
	must(f.Mkdir(ctx, "p/q/r", 0, true)) // exists: fine when recursive
	wantErr(f.Mkdir(ctx, "a.txt/sub", 0, true), "mkdir a.txt/sub: not a directory")
	fi, _ = os.Stat(filepath.Join(ws, "p/q/r"))
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("p/q/r: %v", fi.Mode())
	}

	// readdir
	must(f.WriteFile(ctx, "d/b", nil, 0))
	must(f.WriteFile(ctx, "d/a", nil, 0))
	must(f.Mkdir(ctx, "d/c", 0, false))
	ents, err := f.ReadDir(ctx, "d")
	must(err)
	if want := []DirEntry{{"a", false}, {"b", false}, {"c", true}}; !slices.Equal(ents, want) {
		t.Errorf("ReadDir = %v, want %v", ents, want)
	}
	_, err = f.ReadDir(ctx, "nodir")
	wantErr(err, "readdir nodir: no such file or directory")
	_, err = f.ReadDir(ctx, "a.txt")
	wantErr(err, "readdir a.txt: not a directory")

	// symlink / readlink / stat / lstat
	must(f.Symlink(ctx, "a.txt", "link"))
	wantErr(f.Symlink(ctx, "a.txt", "link"), "symlink link: file exists")
	target, err := f.Readlink(ctx, "link")
	if err != nil || target != "a.txt" {
		t.Errorf("Readlink = %q, %v", target, err)
	}
	_, err = f.Readlink(ctx, "a.txt")
	wantErr(err, "readlink a.txt: invalid argument")
	st, err := f.Stat(ctx, "link")
	must(err)
	if st.Name != "link" || st.Size != 5 || st.IsDir || st.IsSymlink || !st.Mode.IsRegular() {
		t.Errorf("Stat(link) = %+v", st)
	}
	if d := time.Since(st.ModTime); d < 0 || d > time.Minute {
		t.Errorf("mtime %v", st.ModTime)
	}
	lst, err := f.Lstat(ctx, "link")
	must(err)
	if lst.Name != "link" || !lst.IsSymlink || lst.IsDir {
		t.Errorf("Lstat(link) = %+v", lst)
	}
	st, err = f.Stat(ctx, filepath.Join(ws, "d"))
	must(err)
	if !st.IsDir || st.Name != "d" {
		t.Errorf("Stat(d) = %+v", st)
	}
	_, err = f.Stat(ctx, "missing")
	wantErr(err, "stat missing: no such file or directory")
	_, err = f.Lstat(ctx, "missing")
	wantErr(err, "lstat missing: no such file or directory")
	must(f.Symlink(ctx, "nowhere", "dangling"))
	_, err = f.Stat(ctx, "dangling")
	wantErr(err, "stat dangling: no such file or directory")

	// exists
	for name, want := range map[string]bool{"a.txt": true, "d": true, "link": true, "missing": false, "dangling": false, "a.txt/x": false} {
		got, err := f.Exists(ctx, name)
		if err != nil || got != want {
			t.Errorf("Exists(%q) = %v, %v; want %v", name, got, err, want)
		}
	}

	// chmod
	must(f.Chmod(ctx, "a.txt", 0o600))
	fi, _ = os.Stat(filepath.Join(ws, "a.txt"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("after chmod: %v", fi.Mode().Perm())
	}
	wantErr(f.Chmod(ctx, "missing", 0o600), "chmod missing: no such file or directory")

	// rename
	must(f.Rename(ctx, "a.txt", "d/renamed.txt"))
	if b, err := os.ReadFile(filepath.Join(ws, "d/renamed.txt")); err != nil || string(b) != "alpha" {
		t.Errorf("renamed: %q, %v", b, err)
	}
	wantErr(f.Rename(ctx, "a.txt", "b.txt"), "rename a.txt -> b.txt: no such file or directory")

	// mkdtemp
	tmp, err := f.MkdirTemp(ctx, "", "blaise-test-")
	must(err)
	defer os.RemoveAll(tmp)
	if filepath.Dir(tmp) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(tmp), "blaise-test-") {
		t.Errorf("MkdirTemp = %q", tmp)
	}
	tmp2, err := f.MkdirTemp(ctx, "d", "t-")
	must(err)
	if filepath.Dir(tmp2) != filepath.Join(ws, "d") || !strings.HasPrefix(filepath.Base(tmp2), "t-") {
		t.Errorf("MkdirTemp(d) = %q", tmp2)
	}
	tmp3, err := f.MkdirTemp(ctx, "", filepath.Join(ws, "p", "node-"))
	must(err)
	if filepath.Dir(tmp3) != filepath.Join(ws, "p") || !strings.HasPrefix(filepath.Base(tmp3), "node-") {
		t.Errorf("MkdirTemp(path prefix) = %q", tmp3)
	}
	_, err = f.MkdirTemp(ctx, filepath.Join(ws, "nodir"), "x-")
	wantErr(err, "mkdtemp "+filepath.Join(ws, "nodir", "x-")+": no such file or directory")

	// rm
	wantErr(f.Remove(ctx, "missing", false, false), "rm missing: no such file or directory")
	must(f.Remove(ctx, "missing", false, true))
	must(f.Remove(ctx, "missing/deeper", true, true))
	wantErr(f.Remove(ctx, "d", false, false), "rm d: is a directory")
	must(f.Remove(ctx, "link", false, false))
	if _, err := os.Lstat(filepath.Join(ws, "link")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("link still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "d/renamed.txt")); err != nil {
		t.Errorf("removing the link removed its target: %v", err)
	}
	must(f.Remove(ctx, "d", true, false))
	if _, err := os.Stat(filepath.Join(ws, "d")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("d still there: %v", err)
	}

	// A cancelled context stops calls before they start.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f.ReadFile(cctx, "x")
	wantErr(err, "read_file x: context canceled")
}

// umask returns the process's umask.
func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

// TestH1_OnCommand: the local host tells its observer of every command it
// starts, exec and spawn alike, with the directory it runs in; a command
// that cannot start is not reported.
func TestH1_OnCommand(t *testing.T) {
	ws := t.TempDir()
	var got []string
	h := NewLocal(LocalOptions{Workspace: ws, OnCommand: func(argv []string, dir string) {
		got = append(got, strings.Join(argv, " ")+" in "+dir)
	}})
	defer h.Close()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(context.Background(), []string{"true", "a b"}, ExecOptions{Dir: "sub"}); err != nil {
		t.Fatal(err)
	}
	p, err := h.Spawn(context.Background(), SpawnSpec{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(context.Background(), []string{"no-such-program-here"}, ExecOptions{}); err == nil {
		t.Fatal("a missing program started")
	}
	want := []string{"true a b in " + filepath.Join(ws, "sub"), "cat in " + ws}
	if !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", got, want)
	}
}
