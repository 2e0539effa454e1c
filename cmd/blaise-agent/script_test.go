package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"listen": cmdListen,
		},
		Condition: func(cond string) (bool, error) {
			if cond != "bwrap" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return bwrapWorks(), nil
		},
		UpdateScripts: os.Getenv("UPDATE_SCRIPTS") == "1",
	})
}

// cmdListen (listen NAME) listens on a loopback port until the script ends,
// accepting and closing connections, and sets $NAME to its address: a peer
// for the demo agent's /dial.
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: listen NAME")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	ts.Defer(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ts.Setenv(args[0], ln.Addr().String())
}

// bwrapWorks reports whether bubblewrap is installed and can make the
// namespaces blaise:sandbox asks for (the condition [bwrap]).
var bwrapWorks = sync.OnceValue(func() bool {
	return exec.Command("bwrap", "--unshare-all", "--ro-bind", "/", "/", "true").Run() == nil
})
