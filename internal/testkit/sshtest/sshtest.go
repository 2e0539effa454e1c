//go:build linux

// Package sshtest runs a real OpenSSH server for tests, reached with the
// system's ssh client.
//
// Start generates a host key and a client key in the test's temporary
// directory, starts sshd for the current user and waits until a real ssh
// round trip succeeds:
//
//	srv := sshtest.Start(t)
//	argv := srv.Argv("echo", "hello")
//	out, err := exec.Command(argv[0], argv[1:]...).Output()
//
// When the test runs as root and the ip command can make a network
// namespace, the server runs in a namespace of its own joined to the
// runner by a veth pair, so it has an address of its own (10.123.x.2);
// otherwise it listens on 127.0.0.1 with a free port. InNamespace says
// which. The fields Addr, Port, User, KeyFile and KnownHostsFile are what an
// ssh client needs; Argv builds a complete, hermetic ssh command line.
//
// The server, every process its sessions started (they carry
// BLAISE_SSHTEST in their environment, and in a namespace they are found by
// namespace too), the namespace and the veth pair are removed when the test
// ends, pass or fail; sshd's log is shown if the test failed. Kill and Cut
// break the server or the network mid-test for fault tests; like Start,
// they must be called from the test's goroutine. What a test process killed
// before its cleanup left behind is removed by the next process's first
// Start.
//
// Sessions run with SHLVL=1, so that bash does not read ~/.bashrc as it
// otherwise does for commands run by sshd.
//
// sshd runs as the current user and lets only that user in; it refuses
// accounts whose password is locked ("!" or "*" in /etc/shadow), as it
// does not use PAM.
//
// Start skips the test when sshd or ssh-keygen is missing, unless CI is set
// to true in the environment, where it fails: CI must install them.
package sshtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// A Server is a running sshd that accepts the client key KeyFile for User.
type Server struct {
	Addr           string // the server's IP address
	Port           int
	User           string // the current user, the one sshd lets in
	KeyFile        string // the client's private key
	KnownHostsFile string // holds the server's host key for [Addr]:Port
	InNamespace    bool   // whether the server runs in a network namespace of its own
	Namespace      string // the namespace's name, "" without one
	Pid            int    // sshd's process id

	st *state
}

// state is what Kill, Cut and the cleanup share; Servers copied by value
// (to change a field for one command line) share it too.
type state struct {
	t      testing.TB
	ssh    string
	id     string // the value of envMarker in this server's sessions
	veth   string // the runner's end of the veth pair, "" without a namespace
	log    *testsupport.Buffer
	exited chan struct{} // closed when sshd has exited and been reaped

	started bool // Start returned; its failures show sshd's log themselves
}

// An Option changes how Start runs the server.
type Option func(*config)

type config struct {
	sshd      string
	loopback  bool
	setEnv    []string
	acceptEnv []string
}

// Loopback runs the server on 127.0.0.1 even where a network namespace
// could be made.
func Loopback() Option { return func(c *config) { c.loopback = true } }

// SSHD runs the sshd at path (an absolute path) instead of the system's.
func SSHD(path string) Option { return func(c *config) { c.sshd = path } }

// Env sets variables ("NAME=value") in every session's environment.
func Env(kv ...string) Option { return func(c *config) { c.setEnv = append(c.setEnv, kv...) } }

// AcceptEnv lets clients send the variables whose names match patterns
// (ssh -o SendEnv= or -o SetEnv=); sshd's patterns may use * and ?.
func AcceptEnv(patterns ...string) Option {
	return func(c *config) { c.acceptEnv = append(c.acceptEnv, patterns...) }
}

const (
	envMarker  = "BLAISE_SSHTEST" // set to state.id in every session
	nsPrefix   = "blsshtest-"     // namespaces are named nsPrefix<creator pid>-<n>
	vethPrefix = "bs"             // veth pairs are named vethPrefix<creator pid>n<n>
	nsPort     = 2222             // the port inside a namespace, which has it to itself
	nsIface    = "eth0"           // the namespace's end of the veth pair
	timeout    = 20 * time.Second // for sshd to accept a first session
)

var (
	counter    atomic.Int64
	staleOnce  sync.Once
	subnetBase = net.IPv4(10, 123, 0, 0).To4()
)

// Start starts an sshd for the test and returns it once a real ssh session
// has run on it. The server and everything it started are removed when the
// test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	for _, kv := range c.setEnv {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			t.Fatalf("sshtest: Env(%q): want NAME=value", kv)
		}
	}
	sshPath, keygen := c.tools(t)
	staleOnce.Do(removeStale)

	me, err := user.Current()
	if err != nil {
		t.Fatalf("sshtest: current user: %v", err)
	}
	if os.Geteuid() == 0 {
		// sshd run by root refuses to start without its privilege
		// separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshtest: sshd needs /run/sshd: %v", err)
		}
	}

	dir := t.TempDir()
	for _, name := range []string{"host_key", "client_key"} {
		if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "sshtest "+name,
			"-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("sshtest: ssh-keygen %s: %v\n%s", name, err, out)
		}
	}
	clientPub := readFile(t, filepath.Join(dir, "client_key.pub"))
	writeFile(t, filepath.Join(dir, "authorized_keys"), clientPub)

	n := counter.Add(1)
	st := &state{
		t:      t,
		ssh:    sshPath,
		id:     fmt.Sprintf("%d-%d", os.Getpid(), n),
		log:    new(testsupport.Buffer),
		exited: make(chan struct{}),
	}
	s := &Server{
		User:           me.Username,
		KeyFile:        filepath.Join(dir, "client_key"),
		KnownHostsFile: filepath.Join(dir, "known_hosts"),
		st:             st,
	}
	t.Cleanup(func() { s.cleanup() })

	var wrap []string // runs sshd inside the namespace
	if c.loopback {
		t.Logf("sshtest: on loopback, as asked")
	} else if err := s.makeNamespace(n); err != nil {
		t.Logf("sshtest: on loopback: no network namespace: %v", err)
	} else {
		wrap = []string{"ip", "netns", "exec", s.Namespace}
	}

	// On loopback the free port may be taken before sshd binds it: retry.
	hostPub := readFile(t, filepath.Join(dir, "host_key.pub"))
	for attempt := 1; ; attempt++ {
		if !s.InNamespace {
			s.Addr, s.Port = "127.0.0.1", freePort(t)
		}
		writeFile(t, s.KnownHostsFile, fmt.Sprintf("[%s]:%d %s", s.Addr, s.Port, hostPub))
		cfgFile := filepath.Join(dir, "sshd_config")
		writeFile(t, cfgFile, c.sshdConfig(s, dir, st.id))

		err := s.startSSHD(c.sshd, cfgFile, wrap)
		if err == nil {
			st.started = true
			return s
		}
		if !s.InNamespace && attempt < 5 && strings.Contains(st.log.String(), "Address already in use") {
			s.killAll()
			<-st.exited
			st.exited = make(chan struct{})
			st.log = new(testsupport.Buffer)
			continue
		}
		t.Fatalf("sshtest: %v\nsshd's log:\n%s", err, st.log.String())
	}
}

// Require skips the test when sshd, ssh or ssh-keygen is missing (fails it
// under CI=true), as Start does, for a test that starts its servers in
// subtests or child processes, whose skips would not end it.
func Require(t testing.TB) {
	t.Helper()
	new(config).tools(t)
}

// tools finds the programs Start needs, skipping the test (failing it on
// CI) when one is missing.
func (c *config) tools(t testing.TB) (ssh, keygen string) {
	t.Helper()
	var missing []string
	if c.sshd == "" {
		c.sshd = "/usr/sbin/sshd"
		if p, err := exec.LookPath("sshd"); err == nil && filepath.IsAbs(p) {
			c.sshd = p
		}
	}
	if _, err := os.Stat(c.sshd); err != nil {
		missing = append(missing, "sshd ("+c.sshd+")")
	}
	ssh, err := exec.LookPath("ssh")
	if err != nil {
		missing = append(missing, "ssh")
	}
	keygen, err = exec.LookPath("ssh-keygen")
	if err != nil {
		missing = append(missing, "ssh-keygen")
	}
	if len(missing) > 0 {
		msg := "sshtest: missing " + strings.Join(missing, ", ") + " (install openssh-server and openssh-client)"
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s; CI=true, so the test fails instead of skipping", msg)
		}
		t.Skipf("%s", msg)
	}
	return ssh, keygen
}

func (c *config) sshdConfig(s *Server, dir, id string) string {
	lines := []string{
		fmt.Sprintf("Port %d", s.Port),
		"ListenAddress " + s.Addr,
		"HostKey " + filepath.Join(dir, "host_key"),
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"StrictModes no",
		"UsePAM no",
		"UseDNS no",
		"PrintMotd no",
		"PrintLastLog no",
		"X11Forwarding no",
		"AllowTcpForwarding yes",
		"MaxStartups 100",
		"MaxSessions 100",
		"LogLevel INFO",
		"Subsystem sftp internal-sftp",
		// sshd keeps only the first SetEnv line. The marker lets cleanup
		// find the sessions' processes. Bash reads ~/.bashrc for a command
		// sshd runs unless it is a nested shell (SHLVL): sessions do not
		// depend on, or wait for, the user's shell setup.
		"SetEnv " + strings.Join(append([]string{envMarker + "=" + id, "SHLVL=1"}, quoteConfig(c.setEnv)...), " "),
	}
	if len(c.acceptEnv) > 0 {
		lines = append(lines, "AcceptEnv "+strings.Join(c.acceptEnv, " "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// quoteConfig quotes words for sshd_config, whose words are split at
// spaces unless quoted, with \ escaping " and \.
func quoteConfig(words []string) []string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
	}
	return q
}

// startSSHD starts sshd and waits until it accepts a session.
func (s *Server) startSSHD(sshd, cfgFile string, wrap []string) error {
	st := s.st
	argv := append(append([]string{}, wrap...), sshd, "-D", "-e", "-f", cfgFile)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = st.log, st.log
	// sshd dies with the test process; Go ends a thread only when a
	// goroutine locked to it exits, which Start never does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	s.Pid = cmd.Process.Pid
	exited := st.exited
	// Ends with sshd, which the server's Close stops.
	go func() {
		cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort(s.Addr, strconv.Itoa(s.Port))
	for {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited before accepting connections (%s)", cmd.ProcessState)
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd does not accept connections on %s after %v: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := s.Argv("true")
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("first session: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Argv returns a complete ssh command line running command on the server:
// it reads no ssh configuration file, checks the host key against
// KnownHostsFile only, and never prompts. The words of command are quoted
// for the remote shell, so they arrive as given. Options placed right after
// argv[0] take precedence over these, as ssh keeps the first value it gets.
func (s *Server) Argv(command ...string) []string {
	argv := []string{
		s.st.ssh, "-F", "none",
		"-i", s.KeyFile,
		"-p", strconv.Itoa(s.Port),
		"-o", "UserKnownHostsFile=" + s.KnownHostsFile,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "ConnectTimeout=10",
		"-o", "LogLevel=ERROR",
		s.User + "@" + s.Addr,
		"--",
	}
	for _, w := range command {
		argv = append(argv, shellQuote(w))
	}
	return argv
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(w string) string {
	if shellSafe.MatchString(w) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// Kill kills sshd and every process of its sessions, as a crash of the
// server machine would: clients see their connections end.
func (s *Server) Kill() {
	s.st.t.Helper()
	s.killAll()
	select {
	case <-s.st.exited:
	case <-time.After(timeout):
		s.st.t.Fatalf("sshtest: Kill: sshd (pid %d) has not exited after %v", s.Pid, timeout)
	}
}

// Cut breaks the network between the runner and the server: the runner's
// connections to it are aborted (ss -K) and, in a namespace, the veth link
// goes down, so new connections time out too. On loopback only the
// established connections are cut. sshd and its processes keep running,
// as on a machine that dropped off the network.
func (s *Server) Cut() {
	t := s.st.t
	t.Helper()
	if s.InNamespace {
		if err := ip("link", "set", s.st.veth, "down"); err != nil {
			t.Fatalf("sshtest: Cut: %v", err)
		}
	}
	dst := net.JoinHostPort(s.Addr, strconv.Itoa(s.Port))
	if out, err := exec.Command("ss", "-K", "-t", "-n", "dst", dst).CombinedOutput(); err != nil {
		t.Fatalf("sshtest: Cut: ss -K dst %s: %v\n%s", dst, err, out)
	}
	out, err := exec.Command("ss", "-H", "-t", "-n", "state", "established", "dst", dst).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("sshtest: Cut: connections to %s remain after ss -K (kernel without CONFIG_INET_DIAG_DESTROY?): %v\n%s", dst, err, out)
	}
}

// cleanup removes everything Start made and shows sshd's log if the test
// failed.
func (s *Server) cleanup() {
	t := s.st.t
	s.killAll()
	if s.Pid != 0 {
		select {
		case <-s.st.exited:
		case <-time.After(timeout):
			t.Errorf("sshtest: sshd (pid %d) has not exited after %v", s.Pid, timeout)
		}
	}
	if s.Namespace != "" {
		if err := s.removeNamespace(); err != nil {
			t.Errorf("sshtest: %v", err)
		}
	}
	if t.Failed() && s.st.started {
		t.Logf("sshtest: sshd's log:\n%s", s.st.log.String())
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func readFile(t testing.TB, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func writeFile(t testing.TB, path, content string) {
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
}
