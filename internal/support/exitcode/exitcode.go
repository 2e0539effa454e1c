// Package exitcode carries the exit status of a command in its error: the
// program exits with the code of an error that has one (see ExitCode).
package exitcode

// Error ends the program with Code.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
func (e *Error) ExitCode() int { return e.Code }
