package chain

import (
	"os"
	"os/exec"
	"strings"
)

// Self returns how to start this program again: the name it was started
// with when that was found on $PATH, else its executable. Configurations
// see it as BLAISE_AGENT, so that a chain can run the built-in demo agent
// (or ship hostd) without the binary being installed.
func Self() (string, error) {
	if !strings.Contains(os.Args[0], string(os.PathSeparator)) {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			return p, nil
		}
	}
	return os.Executable()
}
