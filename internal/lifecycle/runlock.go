package lifecycle

import "errors"

// ErrRunHeld is what taking a run lock that a run holds returns.
var ErrRunHeld = errors.New("the run lock is held")

// RunLocks give each session at most one run at a time (L2).
type RunLocks interface {
	// RunLock takes a session's run lock. With wait it waits a moment for
	// a holder that is not a run; with create, the session is being
	// created. A lock a run holds is an error wrapping ErrRunHeld.
	RunLock(id string, create, wait bool) (RunLock, error)
}

// RunLock is a session's run lock, held.
type RunLock interface {
	// Dup returns another holder of the same lock: the lock goes when
	// every holder has let it go.
	Dup() (RunLock, error)
	// Release lets this holder's lock go.
	Release()
}
