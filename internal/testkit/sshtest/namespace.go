//go:build linux

package sshtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
)

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

// ip runs the ip command with args.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
