//go:build !linux

package streamfile

import "os"

// openDirect leaves the stream to the cache: direct writes are Linux's.
func (s *File) openDirect() {}

// refused reports whether err refuses direct writes; there are none here.
func refused(error) bool { return false }

// advise does nothing where the system takes no such advice.
func advise(*os.File, int64, int64) {}
