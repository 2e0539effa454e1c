//go:build linux

package sshtest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

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
