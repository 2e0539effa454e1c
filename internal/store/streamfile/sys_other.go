//go:build !linux

package streamfile

import "os"

// openDirect leaves the stream to the cache: direct writes are Linux's.
func (s *File) openDirect() {}

// loadTail is never called: there are no direct writes.
func (s *File) loadTail() bool { return false }

// refused reports whether err refuses direct writes; there are none here.
func refused(error) bool { return false }

// advise does nothing where the system takes no such advice.
func advise(*os.File, int64, int64) {}
