//go:build !linux

package streamfile

import "os"

// advise does nothing where the system takes no such advice.
func advise(*os.File, int64, int64) {}
