package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/support/resident"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("BLAISE_TEST_AGENT") == "flood" {
		acptest.Flood(os.Stdin, os.Stdout)
		return
	}
	isolateMounts()
	noRaceExitSleep()
	testscript.Main(testBinary{m}, map[string]func(){"blaise-agent": releaseOnSignal(profiled(main))})
}

// isolateMounts runs the tests, as root, in a mount namespace of their own
// without the network namespaces' mounts (/run/netns). bwrap (the sandbox
// examples) binds the whole mount table read-only and fails ("Unable to
// apply mount flags: remount …/run/netns/…: Invalid argument") when a
// mount under it comes or goes meanwhile, as the SSH tests' namespaces do
// in the packages go test runs at the same time. The marker, inherited by
// every process the tests start, makes this happen once.
func isolateMounts() {
	const marker = "BLAISE_TEST_MOUNTNS"
	if os.Geteuid() != 0 || os.Getenv(marker) != "" {
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return
	}
	os.Setenv(marker, "1")
	args := append([]string{unshare, "--mount", "--propagation", "private", "--", "sh", "-c", `umount -l /run/netns/* 2>/dev/null; exec "$@"`, "sh"}, os.Args...)
	_ = syscall.Exec(unshare, args, os.Environ()) // returns only if it failed: the tests run as they are
}

// profiled is main, writing a CPU profile of the process to
// $BLAISE_TEST_CPUPROFILE/COMMAND-PID.pprof when that is set: the processes
// a benchmark starts (acp, session-process) are profiled where they run.
// releaseOnSignal: under $BLAISE_TEST_RELEASE_ON_USR1, a process gives
// back its start's pages when it gets SIGUSR1 rather than after startOver,
// so that a test measures them before and after however slowly the
// process started.
func releaseOnSignal(main func()) func() {
	if os.Getenv("BLAISE_TEST_RELEASE_ON_USR1") == "" {
		return main
	}
	return func() {
		startOver = 24 * time.Hour
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		// Lives as long as the process, which main ends with os.Exit.
		go func() {
			for range sig {
				resident.Release()
			}
		}()
		main()
	}
}

func profiled(main func()) func() {
	dir := os.Getenv("BLAISE_TEST_CPUPROFILE")
	if dir == "" || len(os.Args) < 2 {
		return main
	}
	return func() {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", os.Args[1], os.Getpid())))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
		main()
	}
}

// noRaceExitSleep spares every process the tests start (commands, session
// processes, agents, which inherit the environment) the race detector's
// second of sleep at exit. It is set once here, not with t.Setenv, which
// would keep the tests from running in parallel.
func noRaceExitSleep() {
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// testBinary runs the tests, waitingParallel at once unless -parallel
// says otherwise, stops their PostgreSQL server after them, and fails if
// a goroutine is left running (goleak.VerifyTestMain, as testscript.Main
// exits itself). (Run is
// not called when the binary runs as blaise-agent, whose flags are not
// the tests'.)
type testBinary struct{ m *testing.M }

func (b testBinary) Run() int {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(waitingParallel, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	code := pgtest.Run(b.m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// waitingParallel is how many tests run at once by default, more than go
// test's one per CPU: most of these tests wait on processes, leases and
// timers, not on the CPU (on two cores, 4 at once take about half the
// time of 2).
const waitingParallel = 4

// TestScripts runs the end-to-end tests of the CLI in testscripts/.
func TestScripts(t *testing.T) {
	t.Parallel()
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
			"listen":           cmdListen,
			"container-engine": cmdContainerEngine,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "bwrap":
				return bwrapWorks(), nil
			case "container-engine":
				engine, _ := containerEngine()
				return engine != "", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
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

// cmdContainerEngine (container-engine) sets $ENGINE to the first of
// podman and docker that runs a container of $IMAGE here, or else
// $NO_ENGINE to each engine's error, for [!container-engine] skip.
func cmdContainerEngine(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: container-engine")
	}
	engine, why := containerEngine()
	ts.Setenv("IMAGE", engineImage)
	ts.Setenv("ENGINE", engine)
	ts.Setenv("NO_ENGINE", why)
}

// engineImage is the image the container tests run.
const engineImage = "docker.io/library/debian:stable-slim"

// containerEngine probes podman and docker once: the first that runs a
// container of engineImage, or why none does.
var containerEngine = sync.OnceValues(func() (string, string) {
	var why []string
	for _, engine := range []string{"podman", "docker"} {
		if _, err := exec.LookPath(engine); err != nil {
			why = append(why, engine+": not installed")
			continue
		}
		out, err := exec.Command(engine, "run", "--rm", engineImage, "true").CombinedOutput()
		if err == nil {
			return engine, ""
		}
		why = append(why, fmt.Sprintf("%s: %v: %s", engine, err, strings.TrimSpace(string(out))))
	}
	return "", "no container engine can run a container of " + engineImage + " here: " + strings.Join(why, "; ")
})

// bwrapWorks reports whether bubblewrap is installed and can make the
// namespaces blaise:sandbox asks for (the condition [bwrap]).
var bwrapWorks = sync.OnceValue(func() bool {
	return exec.Command("bwrap", "--unshare-all", "--ro-bind", "/", "/", "true").Run() == nil
})
