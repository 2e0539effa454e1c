package pgtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

func TestMain(m *testing.M) { Main(m) }

// helperEnv makes TestHelper do its job: "dsn" prints a database's DSN and
// waits for its stdin to close.
const helperEnv = "PGTEST_HELPER"

func TestHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("a child of the other tests")
	}
	dsn := DSN(t)
	os.Stdout.WriteString(dsn + "\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

func helper(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"=1")...)
	return cmd
}

// TestMissingPostgresSkipsButFailsUnderCI: where PostgreSQL is missing, its
// tests skip, saying why; under CI=true they fail instead, so CI cannot pass
// without it.
func TestMissingPostgresSkipsButFailsUnderCI(t *testing.T) {
	for ci, want := range map[string]string{"": "--- SKIP", "true": "--- FAIL"} {
		out, _ := helper(t, "PGTEST_BIN="+t.TempDir(), "CI="+ci).CombinedOutput()
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "PostgreSQL is not installed") {
			t.Errorf("CI=%q: want %s saying PostgreSQL is not installed, got:\n%s", ci, want, out)
		}
	}
}

// postmasters returns the pids of the postgres processes whose command
// line names dir.
func postmasters(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), dir) && testsupport.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestNoOrphanPostgres: the test binary's PostgreSQL outlives it neither
// when it ends (Main stops it and removes its directory) nor when it is
// killed.
func TestNoOrphanPostgres(t *testing.T) {
	if BinDir() == "" {
		DSN(t) // skips, or fails under CI
	}
	for _, kill := range []bool{false, true} {
		cmd := helper(t)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var line string
		for lines := bufio.NewScanner(stdout); !strings.HasPrefix(line, "postgres://"); {
			if !lines.Scan() {
				t.Fatalf("the child gave no DSN: %v", lines.Err())
			}
			line = lines.Text()
		}
		_, dir, ok := strings.Cut(strings.TrimSpace(line), "host=")
		dir, _, _ = strings.Cut(dir, "&")
		pids := postmasters(dir)
		if !ok || len(pids) == 0 {
			t.Fatalf("no postgres serves %q", line)
		}
		if kill {
			cmd.Process.Kill()
		} else {
			stdin.Close()
		}
		cmd.Wait()
		for _, pid := range pids {
			testsupport.WaitGone(t, pid, "postgres of the ended test binary")
		}
		if kill {
			os.RemoveAll(dir) // what the killed binary could not
		} else if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", dir, err)
		}
	}
}
