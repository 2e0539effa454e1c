//go:build linux

package sshtest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/sshtest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

const waitLimit = 30 * time.Second

// run runs argv with stdin and returns its stdout, stderr and error; it
// fails the test if argv runs longer than waitLimit.
func run(t *testing.T, argv []string, stdin string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after %v", strings.Join(argv, " "), waitLimit)
	}
	return stdout.String(), stderr.String(), err
}

// exitCode is err's exit status, or -1 if err is not an exit status.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func TestH2_SSHTestRunsCommand(t *testing.T) {
	srv := sshtest.Start(t)
	t.Logf("server %s:%d, in namespace: %v", srv.Addr, srv.Port, srv.InNamespace)
	if srv.InNamespace == (srv.Addr == "127.0.0.1") || srv.InNamespace == (srv.Namespace == "") {
		t.Errorf("InNamespace %v, Addr %q, Namespace %q disagree", srv.InNamespace, srv.Addr, srv.Namespace)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", srv.Pid))
	if err != nil || strings.TrimSpace(string(comm)) != "sshd" {
		t.Errorf("Pid %d is %q (%v), want sshd", srv.Pid, comm, err)
	}

	// Words with spaces and quotes arrive as given; SSH_CONNECTION ends
	// with the address and port the server was reached on.
	out, stderr, err := run(t, srv.Argv("printf", "%s|", "a b", "it's", "$HOME", "\"q\""), "")
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, stderr)
	}
	if want := `a b|it's|$HOME|"q"|`; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	out, stderr, err = run(t, srv.Argv("sh", "-c", `echo "$SSH_CONNECTION"; id -un`), "")
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, stderr)
	}
	if want := fmt.Sprintf(" %s %d\n%s\n", srv.Addr, srv.Port, srv.User); !strings.HasSuffix(out, want) {
		t.Errorf("stdout %q, want it to end with %q", out, want)
	}
}

func TestH2_SSHTestLoopback(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Loopback())
	if srv.InNamespace || srv.Addr != "127.0.0.1" || srv.Port == 22 {
		t.Errorf("Loopback gave InNamespace %v at %s:%d, want 127.0.0.1 and not port 22", srv.InNamespace, srv.Addr, srv.Port)
	}
	out, stderr, err := run(t, srv.Argv("echo", "hello"), "")
	if err != nil || out != "hello\n" {
		t.Fatalf("ssh echo hello: %q, %v\n%s", out, err, stderr)
	}
}

func TestH2_SSHTestKnownHostsChecked(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	otherPub, err := os.ReadFile(other + ".pub")
	if err != nil {
		t.Fatal(err)
	}

	wrong := *srv
	wrong.KnownHostsFile = filepath.Join(dir, "wrong_known_hosts")
	line := fmt.Sprintf("[%s]:%d %s", srv.Addr, srv.Port, otherPub)
	if err := os.WriteFile(wrong.KnownHostsFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := run(t, wrong.Argv("true"), "")
	if exitCode(err) != 255 || !strings.Contains(stderr, "HOST IDENTIFICATION HAS CHANGED") ||
		!strings.Contains(stderr, "Host key verification failed") {
		t.Errorf("with a wrong host key: %v, stderr %q; want exit 255 and a refused host key", err, stderr)
	}

	unknown := *srv
	unknown.KnownHostsFile = filepath.Join(dir, "empty_known_hosts")
	if err := os.WriteFile(unknown.KnownHostsFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = run(t, unknown.Argv("true"), "")
	if exitCode(err) != 255 || !strings.Contains(stderr, "Host key verification failed") {
		t.Errorf("with no known host key: %v, stderr %q; want exit 255 and a refused host key", err, stderr)
	}
	if b, _ := os.ReadFile(unknown.KnownHostsFile); len(b) != 0 {
		t.Errorf("ssh added to known_hosts: %q", b)
	}
}

func TestH2_SSHTestEnv(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Env(`GREETING=a "b" c`), sshtest.AcceptEnv("BLAISE_X*"))
	argv := srv.Argv("sh", "-c", `echo "$GREETING|$BLAISE_XY|$OTHER"`)
	// Options right after argv[0] come first, and ssh keeps the first.
	argv = append([]string{argv[0], "-o", "SetEnv=BLAISE_XY=1 OTHER=2"}, argv[1:]...)
	out, stderr, err := run(t, argv, "")
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, stderr)
	}
	if want := `a "b" c|1|` + "\n"; out != want {
		t.Errorf("stdout %q, want %q (OTHER is not accepted)", out, want)
	}
}

// session is a long-lived ssh command with pipes to both ends.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *testsupport.Buffer
	once   sync.Once
	done   chan error // receives Wait's result once wait was called
}

func startSession(t testing.TB, argv []string) *session {
	t.Helper()
	s := &session{cmd: exec.Command(argv[0], argv[1:]...), stderr: new(testsupport.Buffer), done: make(chan error, 1)}
	s.cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewReader(out)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.startWait()
		<-s.done
	})
	return s
}

// startWait calls Wait, which closes stdout: only once reading is over.
func (s *session) startWait() {
	s.once.Do(func() { go func() { s.done <- s.cmd.Wait() }() })
}

// roundTrip writes line and reads it back from cat on the far side.
func (s *session) roundTrip(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		t.Fatalf("write: %v; stderr: %s", err, s.stderr)
	}
	got, err := s.stdout.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("read %q, %v; want %q; stderr: %s", got, err, line, s.stderr)
	}
}

// wait returns the ssh's error once it exits, failing after waitLimit.
func (s *session) wait(t *testing.T) error {
	t.Helper()
	s.startWait()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(waitLimit):
		t.Fatalf("ssh still running after %v", waitLimit)
		return nil
	}
}

func TestH2_SSHTestStreamsBothWays(t *testing.T) {
	srv := sshtest.Start(t)
	s := startSession(t, srv.Argv("cat"))

	// Each line comes back before the next is sent: nothing waits for
	// more input or for the end of the stream.
	for i := range 500 {
		s.roundTrip(t, "line "+strconv.Itoa(i))
	}

	// Then a bulk transfer, written while it is read back.
	data := make([]byte, 8<<20)
	rand.Read(data)
	var wg sync.WaitGroup
	wg.Go(func() {
		s.stdin.Write(data)
		s.stdin.Close()
	})
	got, err := io.ReadAll(s.stdout)
	wg.Wait()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d of %d bytes, equal %v, %v; stderr: %s", len(got), len(data), bytes.Equal(got, data), err, s.stderr)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("ssh cat after stdin closed: %v; stderr: %s", err, s.stderr)
	}
}

func TestH2_SSHTestKill(t *testing.T) {
	srv := sshtest.Start(t)
	s := startSession(t, srv.Argv("cat"))
	s.roundTrip(t, "before")

	srv.Kill()
	if err := s.wait(t); exitCode(err) != 255 {
		t.Errorf("ssh after Kill: %v, want exit status 255; stderr: %s", err, s.stderr)
	}
	if testsupport.Alive(srv.Pid) {
		t.Errorf("sshd (pid %d) alive after Kill", srv.Pid)
	}
	_, stderr, err := run(t, srv.Argv("true"), "")
	if exitCode(err) != 255 || !strings.Contains(stderr, "Connection refused") {
		t.Errorf("new ssh after Kill: %v, stderr %q; want exit 255 and Connection refused", err, stderr)
	}
}

func TestH2_SSHTestCut(t *testing.T) {
	srv := sshtest.Start(t)
	s := startSession(t, srv.Argv("cat"))
	s.roundTrip(t, "before")

	srv.Cut()
	if err := s.wait(t); exitCode(err) != 255 {
		t.Errorf("ssh after Cut: %v, want exit status 255; stderr: %s", err, s.stderr)
	}
	if !testsupport.Alive(srv.Pid) {
		t.Errorf("sshd (pid %d) died from Cut", srv.Pid)
	}
	if !srv.InNamespace {
		return // on loopback, new connections still get through
	}
	argv := srv.Argv("true")
	argv = append([]string{argv[0], "-o", "ConnectTimeout=1"}, argv[1:]...)
	_, stderr, err := run(t, argv, "")
	if exitCode(err) != 255 {
		t.Errorf("new ssh after Cut: %v, stderr %q; want exit 255", err, stderr)
	}
}

func TestH2_SSHTestCleanup(t *testing.T) {
	sshtest.Require(t) // the servers start in subtests
	for _, loopback := range []bool{false, true} {
		var srv *sshtest.Server
		var sleepPid int
		var opts []sshtest.Option
		if loopback {
			opts = append(opts, sshtest.Loopback())
		}
		t.Run(fmt.Sprintf("loopback=%v", loopback), func(t *testing.T) {
			srv = sshtest.Start(t, opts...)
			// A process the session leaves behind, as a daemon would.
			out, stderr, err := run(t, srv.Argv("sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"), "")
			if err != nil {
				t.Fatalf("ssh: %v\n%s", err, stderr)
			}
			if sleepPid, err = strconv.Atoi(strings.TrimSpace(out)); err != nil || !testsupport.Alive(sleepPid) {
				t.Fatalf("sleep's pid %q: %v, alive %v", out, err, testsupport.Alive(sleepPid))
			}
		})
		if srv == nil {
			t.Fatal("no server")
		}
		if !testsupport.Gone(srv.Pid) {
			t.Errorf("sshd (pid %d) alive after cleanup", srv.Pid)
		}
		if !testsupport.Gone(sleepPid) {
			t.Errorf("the session's sleep (pid %d) alive after cleanup", sleepPid)
			syscall.Kill(sleepPid, syscall.SIGKILL)
		}
		if !srv.InNamespace {
			continue
		}
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		if err != nil || strings.Contains(string(out), srv.Namespace) {
			t.Errorf("ip netns list after cleanup: %v\n%s", err, out)
		}
		// No other test runs now: the veth of this process must be gone.
		out, err = exec.Command("ip", "-o", "link").CombinedOutput()
		if veth := fmt.Sprintf("bs%dn", os.Getpid()); err != nil || strings.Contains(string(out), veth) {
			t.Errorf("ip -o link after cleanup (%s…): %v\n%s", veth, err, out)
		}
	}
}

func TestH2_SSHTestTwoServers(t *testing.T) {
	a, b := sshtest.Start(t), sshtest.Start(t)
	if a.Addr == b.Addr && a.Port == b.Port {
		t.Fatalf("two servers at %s:%d", a.Addr, a.Port)
	}
	if a.InNamespace && (!b.InNamespace || a.Namespace == b.Namespace || a.Addr == b.Addr) {
		t.Errorf("servers in namespaces %q at %s and %q at %s: want two namespaces and addresses",
			a.Namespace, a.Addr, b.Namespace, b.Addr)
	}
	// Each address reaches its own server: the other's host key is refused.
	for _, srv := range []*sshtest.Server{a, b} {
		if out, stderr, err := run(t, srv.Argv("echo", srv.Addr), ""); err != nil || out != srv.Addr+"\n" {
			t.Errorf("ssh to %s: %q, %v\n%s", srv.Addr, out, err, stderr)
		}
	}
	crossed := *a
	hostKey, err := os.ReadFile(b.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(string(hostKey), " ")
	crossed.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s", a.Addr, a.Port, key)
	if err := os.WriteFile(crossed.KnownHostsFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, crossed.Argv("true"), ""); exitCode(err) != 255 || !strings.Contains(stderr, "HOST IDENTIFICATION HAS CHANGED") {
		t.Errorf("ssh to %s with %s's host key: %v, stderr %q; want it refused", a.Addr, b.Addr, err, stderr)
	}
}

func TestH2_SSHTestParallel(t *testing.T) {
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			srv := sshtest.Start(t)
			out, stderr, err := run(t, srv.Argv("echo", strconv.Itoa(i)), "")
			if err != nil || out != strconv.Itoa(i)+"\n" {
				t.Errorf("ssh echo %d: %q, %v\n%s", i, out, err, stderr)
			}
		})
	}
}

// recorder is a testing.TB that records Skipf and Fatalf and ends the
// goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestH2_SSHTestMissingSSHD(t *testing.T) {
	start := func(ci string) *recorder {
		t.Setenv("CI", ci)
		return startRecorded(t, sshtest.SSHD("/nonexistent/sshd"))
	}
	want := "sshtest: missing sshd (/nonexistent/sshd) (install openssh-server and openssh-client)"

	r := start("")
	if r.skipped != want || r.failed != "" {
		t.Errorf("without CI: skipped %q, failed %q; want skipped %q", r.skipped, r.failed, want)
	}
	r = start("true")
	if want += "; CI=true, so the test fails instead of skipping"; r.failed != want || r.skipped != "" {
		t.Errorf("with CI=true: failed %q, skipped %q; want failed %q", r.failed, r.skipped, want)
	}
}

// TestH2_SSHTestHelper is run by TestH2_SSHTestStaleRemoved in a child
// process: with SSHTEST_HOLD=1 it starts a server, leaves a daemon behind,
// prints what it made and waits to be killed; with SSHTEST_HOLD=0 it only
// starts a server.
func TestH2_SSHTestHelper(t *testing.T) {
	hold := os.Getenv("SSHTEST_HOLD")
	if hold == "" {
		t.Skip("run by TestH2_SSHTestStaleRemoved")
	}
	srv := sshtest.Start(t)
	if hold != "1" {
		return
	}
	out, stderr, err := run(t, srv.Argv("sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"), "")
	if err != nil {
		t.Fatalf("ssh: %v\n%s", err, stderr)
	}
	ns := srv.Namespace
	if ns == "" {
		ns = "-"
	}
	fmt.Printf("made %d %s %s", srv.Pid, ns, out)
	select {}
}

func TestH2_SSHTestStaleRemoved(t *testing.T) {
	sshtest.Require(t) // the servers start in child processes
	helper := func(hold string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestH2_SSHTestHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "SSHTEST_HOLD="+hold)
		return cmd
	}
	// A test process killed before its cleanup.
	held := helper("1")
	stdout, err := held.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	var sshdPid, sleepPid int
	var ns string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "made %d %s %d", &sshdPid, &ns, &sleepPid); err == nil {
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	held.Process.Kill()
	held.Wait()
	if sleepPid == 0 {
		t.Fatal("the helper did not say what it made")
	}
	if !testsupport.Gone(sshdPid) {
		t.Errorf("sshd (pid %d) outlived the test process", sshdPid)
	}
	if !testsupport.Alive(sleepPid) {
		t.Fatalf("the session's sleep (pid %d) is gone already: nothing to check", sleepPid)
	}
	if ns == "-" {
		ns = "" // on loopback
	} else if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil || !strings.Contains(string(out), ns) {
		t.Fatalf("namespace %s is gone already: nothing to check: %v\n%s", ns, err, out)
	}

	// The next test process removes what it left.
	if out, err := helper("0").CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !testsupport.Gone(sleepPid) {
		t.Errorf("the session's sleep (pid %d) alive after the next Start", sleepPid)
		syscall.Kill(sleepPid, syscall.SIGKILL)
	}
	if ns == "" {
		return
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil || strings.Contains(string(out), ns) {
		t.Errorf("ip netns list after the next Start: %v\n%s", err, out)
	}
	veth := fmt.Sprintf("bs%dn", held.Process.Pid)
	if out, err := exec.Command("ip", "-o", "link").CombinedOutput(); err != nil || strings.Contains(string(out), veth) {
		t.Errorf("ip -o link after the next Start (%s…): %v\n%s", veth, err, out)
	}
}

// startRecorded runs Start with opts on a recorder and returns it once
// Start has failed or skipped the test.
func startRecorded(t *testing.T, opts ...sshtest.Option) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sshtest.Start(r, opts...)
		t.Errorf("Start returned")
	}()
	<-done
	return r
}

func TestH2_SSHTestBadEnv(t *testing.T) {
	for _, kv := range []string{"NO_EQUALS_SIGN", "=value"} {
		if got, want := startRecorded(t, sshtest.Env("A=1", kv)).failed, fmt.Sprintf("sshtest: Env(%q): want NAME=value", kv); got != want {
			t.Errorf("failure %q, want %q", got, want)
		}
	}
}

func TestH2_SSHTestSSHDFails(t *testing.T) {
	sshd := filepath.Join(t.TempDir(), "sshd")
	if err := os.WriteFile(sshd, []byte("#!/bin/sh\necho \"$0: broken\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := startRecorded(t, sshtest.SSHD(sshd)).failed
	want := "sshtest: sshd exited before accepting connections (exit status 3)\nsshd's log:\n" + sshd + ": broken\n"
	if got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
}

// BenchmarkH2_SSHTestExec runs true on the runner, then on the server
// through a new ssh connection each time.
func BenchmarkH2_SSHTestExec(b *testing.B) {
	srv := sshtest.Start(b)
	for _, argv := range [][]string{{"true"}, srv.Argv("true")} {
		b.Run(map[bool]string{true: "local", false: "ssh"}[len(argv) == 1], func(b *testing.B) {
			for b.Loop() {
				if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
			}
		})
	}
}

// BenchmarkH2_SSHTestStream sends 1 MiB through a long-lived cat and reads
// it back: a cat on the runner, then one on the server through ssh.
func BenchmarkH2_SSHTestStream(b *testing.B) {
	srv := sshtest.Start(b)
	data := make([]byte, 1<<20)
	rand.Read(data)
	for _, argv := range [][]string{{"cat"}, srv.Argv("cat")} {
		b.Run(map[bool]string{true: "local", false: "ssh"}[len(argv) == 1], func(b *testing.B) {
			s := startSession(b, argv)
			s.roundTrip(b, "connected") // not timed
			got := make([]byte, len(data))
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				go s.stdin.Write(data)
				if _, err := io.ReadFull(s.stdout, got); err != nil {
					b.Fatalf("read: %v; stderr: %s", err, s.stderr)
				}
			}
		})
	}
}
