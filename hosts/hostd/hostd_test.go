package hostd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// pipeTransport is one end of a pair of OS pipes.
type pipeTransport struct {
	r *os.File
	w *os.File
}

func (p pipeTransport) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeTransport) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeTransport) Close() error                { p.w.Close(); return p.r.Close() }
func (p pipeTransport) Diagnose() string            { return "" }

// pipes returns the two ends of a bidirectional stream made of OS pipes.
func pipes(t testing.TB) (a, b pipeTransport) {
	r1, w1, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return pipeTransport{r1, w2}, pipeTransport{r2, w1}
}

// served is a hostd serving a local host in workspace, and a client of it.
type servedHost struct {
	client *Client
	local  *hosts.Local
	done   chan error // Serve's result
}

func serve(t testing.TB, workspace string, opts ServeOptions) (*servedHost, error) {
	t.Helper()
	a, b := pipes(t)
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: workspace})
	s := &servedHost{local: local, done: make(chan error, 1)}
	go func() { s.done <- Serve(context.Background(), b, local, opts) }()
	c, err := Dial(context.Background(), a, "test", "command")
	if err != nil {
		return s, err
	}
	s.client = c
	t.Cleanup(func() { c.Close() })
	return s, nil
}

func TestH2_ProtocolCarriesFSCalls(t *testing.T) {
	ws := t.TempDir()
	s, err := serve(t, ws, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := s.client.FS()
	if err := f.WriteFile(ctx, "a.txt", []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("the file on the host: %q %v", b, err)
	}
	if b, err := f.ReadFile(ctx, "a.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("read_file: %q %v", b, err)
	}
	if err := f.Mkdir(ctx, "d/e", 0, true); err != nil {
		t.Fatal(err)
	}
	if err := f.Symlink(ctx, "a.txt", "link"); err != nil {
		t.Fatal(err)
	}
	if target, err := f.Readlink(ctx, "link"); err != nil || target != "a.txt" {
		t.Fatalf("readlink: %q %v", target, err)
	}
	fi, err := f.Lstat(ctx, "link")
	if err != nil || !fi.IsSymlink {
		t.Fatalf("lstat: %+v %v", fi, err)
	}
	fi, err = f.Stat(ctx, "a.txt")
	if err != nil || fi.Size != 5 || fi.Mode.Perm() != 0o600 || fi.Name != "a.txt" {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	if err := f.Chmod(ctx, "a.txt", 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := f.ReadDir(ctx, ".")
	if err != nil || len(ents) != 3 || ents[0].Name != "a.txt" || !ents[1].IsDir {
		t.Fatalf("readdir: %+v %v", ents, err)
	}
	if err := f.Rename(ctx, "a.txt", "b.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Exists(ctx, "b.txt"); !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	dir, err := f.MkdirTemp(ctx, ws, "tmp-")
	if err != nil || !strings.HasPrefix(dir, filepath.Join(ws, "tmp-")) {
		t.Fatalf("mkdtemp: %q %v", dir, err)
	}
	if err := f.Remove(ctx, "d", true, false); err != nil {
		t.Fatal(err)
	}

	// Errors keep their meaning and their text.
	_, err = f.ReadFile(ctx, "missing")
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "read_file missing: no such file or directory" {
		t.Fatalf("read_file missing: %v", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "missing" || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("not a path error with errno: %#v", err)
	}
	if err := f.Mkdir(ctx, "b.txt", 0, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("mkdir existing: %v", err)
	}
	if err := f.Remove(ctx, ".", false, false); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("rm dir: %v", err)
	}
	if _, err := f.ReadFile(ctx, ""); err == nil || !strings.Contains(err.Error(), "empty path") {
		t.Fatalf("empty path: %v", err)
	}
}

func TestH2_ProtocolCarriesExecAndInfo(t *testing.T) {
	ws := t.TempDir()
	s, err := serve(t, ws, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := s.client.Info(ctx)
	if err != nil || info.Kind != "command" || info.Workspace != ws || info.OS != "linux" || !info.Persistent || info.Home == "" {
		t.Fatalf("info %+v %v", info, err)
	}
	res, err := s.client.Exec(ctx, []string{"sh", "-c", "pwd; cat; echo $X >&2; exit 3"}, hosts.ExecOptions{Stdin: []byte("in"), Env: map[string]string{"X": "y"}})
	if err != nil || res.Code != 3 || string(res.Stdout) != ws+"\nin" || string(res.Stderr) != "y\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	res, err = s.client.Exec(ctx, []string{"sleep", "10"}, hosts.ExecOptions{Timeout: 50 * time.Millisecond})
	if err != nil || !res.TimedOut || res.Code != -1 {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	_, err = s.client.Exec(ctx, []string{"no-such-program-x"}, hosts.ExecOptions{})
	if err == nil || err.Error() != `exec "no-such-program-x": executable file not found in $PATH` {
		t.Fatalf("missing program: %v", err)
	}
	// A cancelled call kills the command on the far side.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = s.client.Exec(cctx, []string{"sh", "-c", "echo $$ > pid; sleep 30"}, hosts.ExecOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled exec: %v", err)
	}
	testsupport.WaitGone(t, testsupport.ReadPid(t, filepath.Join(ws, "pid")), "the command")
}

func TestH2_ProtocolCarriesSpawnStreamsSignalsAndExit(t *testing.T) {
	ws := t.TempDir()
	s, err := serve(t, ws, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := s.client.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"sh", "-c", "echo started >&2; cat; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(p.Stderr()).ReadString('\n'); err != nil || l != "started\n" {
		t.Fatalf("stderr %q %v", l, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than a stream's window
	go func() {
		p.Stdin().Write(big)
		p.Stdin().Close()
	}()
	got, err := io.ReadAll(p.Stdout())
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("echoed %d bytes, %v", len(got), err)
	}
	if code, err := p.Wait(); code != 7 || err != nil {
		t.Fatalf("wait: %d %v", code, err)
	}
	if err := p.Signal("TERM"); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Fatalf("signal after exit: %v", err)
	}

	p, err = s.client.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal("BOGUS"); err == nil || !strings.Contains(err.Error(), "unknown signal") {
		t.Fatalf("bad signal: %v", err)
	}
	if err := p.Signal("TERM"); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Wait(); code != -1 {
		t.Fatalf("killed by TERM: code %d", code)
	}

	if _, err := s.client.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"no-such-program-x"}}); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Fatalf("spawn missing: %v", err)
	}
}

func TestC6_ClosingTheClientEndsTheServerAndItsProcesses(t *testing.T) {
	ws := t.TempDir()
	s, err := serve(t, ws, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := s.client.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end")
	}
	testsupport.WaitGone(t, p.Pid(), "the spawned process")
	if code, err := p.Wait(); code != -1 || err == nil {
		t.Fatalf("wait after close: %d %v", code, err)
	}
	_, err = s.client.Exec(ctx, []string{"true"}, hosts.ExecOptions{})
	if !errors.Is(err, hosts.ErrClosed) || err.Error() != "host test: host closed" {
		t.Fatalf("exec after close: %v", err)
	}
	if _, err := s.client.FS().ReadFile(ctx, "x"); !errors.Is(err, hosts.ErrClosed) || err.Error() != "read_file x: host test: host closed" {
		t.Fatalf("read_file after close: %v", err)
	}
}

func TestH2_AStreamThatBreaksFailsCallsAndWaits(t *testing.T) {
	a, b := pipes(t)
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir()})
	go Serve(context.Background(), b, local, ServeOptions{})
	c, err := Dial(context.Background(), a, "test", "command")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	p, err := c.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // the far side's end of the stream goes away
	if code, err := p.Wait(); code != -1 || !errors.Is(err, errLost) {
		t.Fatalf("wait: %d %v", code, err)
	}
	if _, err := c.Exec(ctx, []string{"true"}, hosts.ExecOptions{}); err == nil || err.Error() != "host test: connection to the host lost" {
		t.Fatalf("exec: %v", err)
	}
	testsupport.WaitGone(t, p.Pid(), "the spawned process")
}

func TestH2_APeerOfAnotherVersionIsRefused(t *testing.T) {
	_, err := serve(t, t.TempDir(), ServeOptions{ClaimVersion: 2})
	want := "host test: connect: hostd protocol version mismatch: this side speaks blaise-hostd 1, the far side blaise-hostd 2"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestH2_APeerThatDoesNotSpeakTheProtocolIsRefused(t *testing.T) {
	a, b := pipes(t)
	go func() {
		b.Write([]byte("Welcome to the machine\n"))
		b.Close()
	}()
	_, err := Dial(context.Background(), a, "test", "command")
	want := `host test: connect: the far side does not speak the hostd protocol: it said "Welcome to the machine"`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestH2_ForwardReachesAPortOnTheHost(t *testing.T) {
	s, err := serve(t, t.TempDir(), ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	addr, closer, err := s.client.Forward(context.Background(), hosts.ForwardSpec{LocalAddr: "127.0.0.1:0", RemoteAddr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("ping\n"))
	if l, err := bufio.NewReader(conn).ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("echo through the forward: %q %v", l, err)
	}
	conn.Close()
	closer.Close()
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("the forward still listens after close")
	}
	// A forward to a port nobody listens on drops the connection.
	addr, _, err = s.client.Forward(context.Background(), hosts.ForwardSpec{RemoteAddr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read from a refused forward: %d %v", n, err)
	}
	// Closing the host ends the forward.
	s.client.Close()
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("the forward still listens after the host closed")
	}
}

func TestH2_ACommandHostConnectsOnFirstUseAndRetriesAfterACancelledConnect(t *testing.T) {
	ws := t.TempDir()
	local := hosts.NewLocal(hosts.LocalOptions{Workspace: ws})
	defer local.Close()
	c := NewCommand(CommandOptions{Via: local, Argv: []string{os.Args[0], "hostd", "--workspace", ws}})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Exec(ctx, []string{"true"}, hosts.ExecOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled first use: %v", err)
	}
	res, err := c.Exec(context.Background(), []string{"pwd"}, hosts.ExecOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != ws {
		t.Fatalf("second use: %+v %v", res, err)
	}
	hello, err := c.Hello(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	testsupport.WaitGone(t, hello.PID, "the hostd")
}

func TestH2_ACallWaitingOnAConnectCancelledByAnotherCallConnectsAgain(t *testing.T) {
	ws := t.TempDir()
	var calls atomic.Int32
	started := make(chan struct{})
	c := NewClient(ClientOptions{Name: "test", Kind: "command", Connect: func(ctx context.Context) (Transport, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		a, b := pipes(t)
		local := hosts.NewLocal(hosts.LocalOptions{Workspace: ws})
		go Serve(context.Background(), b, local, ServeOptions{})
		return a, nil
	}})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, []string{"true"}, hosts.ExecOptions{})
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		res, err := c.Exec(context.Background(), []string{"pwd"}, hosts.ExecOptions{})
		if err == nil && strings.TrimSpace(string(res.Stdout)) != ws {
			err = errors.New("pwd said " + string(res.Stdout))
		}
		second <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the second call wait on the first's attempt
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the waiting call: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("connected %d times, want 2", n)
	}
}

func TestH2_KillingAProcessThatHasJustExitedIsNoError(t *testing.T) {
	s, err := serve(t, t.TempDir(), ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := s.client.Spawn(ctx, hosts.SpawnSpec{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("wait: %d %v", code, err)
	}
	// The server has forgotten the process, as it does between its exit
	// and the client reading the report; a kill then is what a kill of an
	// exited local process is.
	id := p.(*remoteProcess).id
	if _, err := s.client.call(ctx, request{Op: opKill, Proc: id}); err != nil {
		t.Fatalf("kill after exit: %v", err)
	}
	_, err = s.client.call(ctx, request{Op: opSignal, Proc: id, Signal: "TERM"})
	if want := "signal TERM: process " + strconv.FormatUint(id, 10) + " has exited"; err == nil || err.Error() != want {
		t.Fatalf("signal after exit: %v, want %s", err, want)
	}
	if _, err := s.client.call(ctx, request{Op: opKill, Proc: id + 100}); err == nil || err.Error() != "kill: no process "+strconv.FormatUint(id+100, 10) {
		t.Fatalf("kill of an id never issued: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill after exit: %v", err)
	}
}

// slowDiagnosis is a transport whose Diagnose waits until released, as a
// command's does while it waits for the command to end.
type slowDiagnosis struct {
	pipeTransport
	release chan struct{}
	calls   atomic.Int32
}

func (d *slowDiagnosis) Diagnose() string {
	d.calls.Add(1)
	<-d.release
	return "exit status 3"
}

func TestH2_ALostStreamIsDiagnosedOnceAndOutsideTheClientsLock(t *testing.T) {
	a, b := pipes(t)
	go Serve(context.Background(), b, hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir()}), ServeOptions{})
	tr := &slowDiagnosis{pipeTransport: a, release: make(chan struct{})}
	c, err := Dial(context.Background(), tr, "test", "command")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	<-c.sess.CloseChan()
	failed := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), []string{"true"}, hosts.ExecOptions{})
		failed <- err
	}()
	testsupport.Eventually(t, "the diagnosis to start", func() bool { return tr.calls.Load() > 0 })
	// Close takes the client's lock while the diagnosis is being made.
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		close(tr.release)
		t.Fatal("Close waited for the diagnosis")
	}
	close(tr.release)
	want := "host test: connection to the host lost (exit status 3)"
	if err := <-failed; err == nil || err.Error() != want {
		t.Fatalf("exec: %v, want %s", err, want)
	}
	if err := c.lost(tr); err.Error() != want || tr.calls.Load() != 1 {
		t.Fatalf("again: %v after %d diagnoses", err, tr.calls.Load())
	}
}

func TestH2_AStreamOfAProcessIsAttachedOnceAndNotAfterAKill(t *testing.T) {
	s, err := serve(t, t.TempDir(), ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.client
	ctx := context.Background()
	ctl, resp, err := c.open(ctx, request{Op: opSpawn, Argv: []string{"sleep", "30"}}, nil)
	if err != nil || resp.Err != nil {
		t.Fatalf("spawn: %v %v", err, resp.Err)
	}
	defer ctl.Close()
	id := resp.Proc
	attach := func(op string) error {
		st, resp, err := c.open(ctx, request{Op: op, Proc: id}, nil)
		if err != nil {
			return err
		}
		defer st.Close()
		return resp.Err.decode(c.sameOS())
	}
	// Two attaches of the same stream at once: one wins.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- attach(opStdout) }()
	}
	e1, e2 := <-errs, <-errs
	want := "stdout: no process " + strconv.FormatUint(id, 10) + " to attach"
	if (e1 == nil) == (e2 == nil) || (e1 != nil && e1.Error() != want) || (e2 != nil && e2.Error() != want) {
		t.Fatalf("two attaches of stdout: %v, %v", e1, e2)
	}
	// A client that gives up on a spawn kills the process; its streams
	// can no longer be attached.
	if _, err := c.call(ctx, request{Op: opKill, Proc: id}); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if err := attach(opStderr); err == nil || err.Error() != "stderr: no process "+strconv.FormatUint(id, 10)+" to attach" {
		t.Fatalf("attach after kill: %v", err)
	}
}
