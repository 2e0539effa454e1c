//go:build !linux

package runstore

import "syscall"

// userTimeout does nothing where TCP takes no user timeout: keepalives
// find a dead path.
func userTimeout(_, _ string, _ syscall.RawConn) error { return nil }
