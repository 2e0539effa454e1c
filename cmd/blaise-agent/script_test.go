package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acptest"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	if os.Getenv("BLAISE_TEST_AGENT") == "flood" {
		acptest.Flood(os.Stdin, os.Stdout)
		return
	}
	testscript.Main(m, map[string]func(){"blaise-agent": main})
}

// TestScripts runs the end-to-end tests of the CLI in testscripts/.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "../../testscripts",
		Setup: func(env *testscript.Env) error {
			repo, err := filepath.Abs("../..")
			if err != nil {
				return err
			}
			env.Setenv("REPO", repo)
			env.Setenv("NO_COLOR", "1")
			env.Setenv("XDG_STATE_HOME", env.WorkDir+"/.state")
			// Race builds sleep a second at exit unless told not to.
			env.Setenv("GORACE", "atexit_sleep_ms=0")
			return nil
		},
		UpdateScripts: os.Getenv("UPDATE_SCRIPTS") == "1",
	})
}
