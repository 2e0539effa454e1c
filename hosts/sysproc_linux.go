package hosts

import "syscall"

// sysProcAttr puts a child in a process group of its own and, on Linux,
// has the kernel kill it when the runner dies.
//
// Pdeathsig fires when the thread that started the child exits; Go only
// ends threads of goroutines that exit while locked to them, which the
// host never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
