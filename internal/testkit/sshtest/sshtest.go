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
	"bytes"
	"context"
	"errors"
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

	"github.com/gofrs/flock"

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

// makeNamespace creates the namespace and the veth pair between it and the
// runner, with the first free /30 of 10.123.0.0/16.
func (s *Server) makeNamespace(n int64) error {
	if os.Geteuid() != 0 {
		return errors.New("not root: ip netns needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return err
	}
	// Another test process may be choosing a subnet at the same time.
	lock := flock.New(filepath.Join(os.TempDir(), "blaise-sshtest.lock"))
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer lock.Unlock()

	runnerIP, nsIP, err := freeSubnet()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), n)
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	s.Namespace = name
	veth := fmt.Sprintf("%s%dn%d", vethPrefix, os.Getpid(), n) // at most 15 bytes, the kernel's limit
	// The peer is created inside the namespace, so deleting the namespace
	// deletes the pair: nothing is left in the runner's namespace.
	steps := [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", nsIface, "netns", name},
		{"addr", "add", runnerIP + "/30", "dev", veth},
		{"link", "set", veth, "up"},
		{"-n", name, "addr", "add", nsIP + "/30", "dev", nsIface},
		{"-n", name, "link", "set", nsIface, "up"},
		{"-n", name, "link", "set", "lo", "up"},
	}
	for _, step := range steps {
		if err := ip(step...); err != nil {
			s.removeNamespace()
			return err
		}
	}
	s.st.veth = veth
	s.InNamespace, s.Addr, s.Port = true, nsIP, nsPort
	return nil
}

// freeSubnet returns the two addresses of the first /30 in 10.123.0.0/16
// that overlaps no address of the runner's interfaces.
func freeSubnet() (runnerIP, nsIP string, err error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", "", fmt.Errorf("interface addresses: %w", err)
	}
	for i := 0; i < 1<<14; i++ {
		base := make(net.IP, 4)
		copy(base, subnetBase)
		base[2], base[3] = byte(i>>6), byte(i&63)<<2
		subnet := &net.IPNet{IP: base, Mask: net.CIDRMask(30, 32)}
		if overlaps(subnet, addrs) {
			continue
		}
		r, n := make(net.IP, 4), make(net.IP, 4)
		copy(r, base)
		copy(n, base)
		r[3]++
		n[3] += 2
		return r.String(), n.String(), nil
	}
	return "", "", errors.New("no free /30 in 10.123.0.0/16")
}

func overlaps(subnet *net.IPNet, addrs []net.Addr) bool {
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && (n.Contains(subnet.IP) || subnet.Contains(n.IP)) {
			return true
		}
	}
	return false
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

// killAll kills sshd, its sessions and what they started: sshd's
// descendants, the processes carrying this server's marker (those that
// outlived their session) and, in a namespace, every process in it.
// sshd's own processes cannot be found by the marker: they overwrite their
// environment with their process title.
func (s *Server) killAll() {
	marker := envMarker + "=" + s.st.id
	killProcs(func() []int {
		pids := markedPids(func(m string) bool { return m == marker })
		if s.Pid != 0 {
			pids = append(pids, descendants(s.Pid)...)
		}
		if s.Namespace != "" {
			pids = append(pids, nsPids(s.Namespace)...)
		}
		return pids
	})
}

// descendants returns root and the processes below it.
func descendants(root int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …", where comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	pids := []int{root}
	for i := 0; i < len(pids); i++ {
		pids = append(pids, children[pids[i]]...)
	}
	return pids
}

// removeNamespace removes the namespace and the veth pair. The kernel
// destroys a deleted namespace, and the pair with it, asynchronously, so
// the pair is deleted first.
func (s *Server) removeNamespace() error {
	killProcs(func() []int { return nsPids(s.Namespace) })
	if s.st.veth != "" {
		if err := ip("link", "del", s.st.veth); err != nil {
			return err
		}
	}
	return ip("netns", "del", s.Namespace)
}

// killProcs stops the processes list returns until it returns no new ones
// (so none can fork unseen), then kills them all.
func killProcs(list func() []int) {
	stopped := map[int]bool{}
	for {
		fresh := false
		for _, pid := range list() {
			if !stopped[pid] && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGSTOP)
				stopped[pid], fresh = true, true
			}
		}
		if !fresh {
			break
		}
	}
	for pid := range stopped {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// markedPids returns the processes whose envMarker value satisfies match.
// Processes whose environment cannot be read (other users') are skipped.
func markedPids(match func(marker string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, envMarker+"=") && match(kv) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func nsPids(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// staleID matches what follows a prefix in the names of namespaces and
// veth pairs and in markers: the creator's pid, "-" or "n", a number.
var staleID = regexp.MustCompile(`^([0-9]+)[-n][0-9]+$`)

// removeStale removes what test processes killed before their cleanup left:
// namespaces, veth pairs and marked processes whose creator is dead.
func removeStale() {
	deadCreator := func(id string) bool {
		m := staleID.FindStringSubmatch(id)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		// This process makes nothing before removeStale returns: what
		// carries its pid was left by an earlier process with that pid.
		return err == nil && pid > 0 && (pid == os.Getpid() || syscall.Kill(pid, 0) == syscall.ESRCH)
	}
	killProcs(func() []int {
		return markedPids(func(m string) bool { return deadCreator(strings.TrimPrefix(m, envMarker+"=")) })
	})
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), nsPrefix); ok && deadCreator(id) {
			s := &Server{Namespace: e.Name(), st: &state{}}
			s.removeNamespace()
		}
	}
	links, _ := net.Interfaces()
	for _, l := range links {
		if id, ok := strings.CutPrefix(l.Name, vethPrefix); ok && deadCreator(id) {
			ip("link", "del", l.Name)
		}
	}
}

// ip runs the ip command with args.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
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
