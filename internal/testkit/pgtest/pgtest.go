// Package pgtest runs a real PostgreSQL server for tests: one per test
// binary, started when a test first asks for a database, in a temporary
// directory, listening only on a unix socket there, and stopped and
// removed when the tests end (Main). Each test gets a fresh database.
//
// Where PostgreSQL is not installed, DSN skips the test, saying so; under
// CI=true it fails instead, so that CI cannot pass without it.
package pgtest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"go.uber.org/goleak"
)

// nobody is the unprivileged user PostgreSQL runs as when the tests run as
// root: it refuses to run as root.
const nobody = 65534

// server is the binary's PostgreSQL.
type server struct {
	dir  string // everything: data, socket, log
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has exited
	log  strings.Builder
	mu   sync.Mutex // guards log
	n    int        // databases made
}

var (
	once    sync.Once
	running *server
	started error
)

// BinDir is where PostgreSQL's programs are: $PGTEST_BIN, else
// /usr/lib/postgresql/MAJOR/bin of the newest major version installed; ""
// when there is none.
func BinDir() string {
	if d := os.Getenv("PGTEST_BIN"); d != "" {
		return d
	}
	dir, newest := "", 0
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	for _, b := range bins {
		d := filepath.Dir(b)
		if v, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil && v > newest {
			dir, newest = d, v
		}
	}
	return dir
}

// DSN returns the URL of a fresh database on the binary's server, dropped
// when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	bin := BinDir()
	if _, err := os.Stat(filepath.Join(bin, "postgres")); bin == "" || err != nil {
		const msg = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; set PGTEST_BIN or install postgresql): the PostgreSQL half of this test is skipped"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " — but not under CI=true")
		}
		t.Skip(msg)
	}
	once.Do(func() { running, started = start(bin) })
	if started != nil {
		t.Fatalf("starting PostgreSQL from %s: %v", bin, started)
	}
	s := running
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("t%d", s.n)
	s.mu.Unlock()
	admin := s.dsn("postgres")
	// A collation other than C, as deployments have, so that tests catch
	// queries that assume byte order.
	if err := s.exec(admin, "CREATE DATABASE "+name+" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"); err != nil {
		t.Fatalf("PostgreSQL: %v\n%s", err, s.logText())
	}
	t.Cleanup(func() {
		if err := s.exec(admin, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("PostgreSQL: %v", err)
		}
	})
	return s.dsn(name)
}

// Main runs the tests of a binary that uses DSN, then stops the server,
// then fails if a goroutine is left running (goleak); call it from TestMain.
func Main(m *testing.M) { goleak.VerifyTestMain(stopping{m}) }

// stopping is m whose Run also stops the server, before goleak looks.
type stopping struct{ m *testing.M }

func (s stopping) Run() int { return Run(s.m) }

// Run runs the tests of m, then stops the server, and returns the exit
// code: for a TestMain that hands m to another runner (testscript.Main).
func Run(m interface{ Run() int }) int {
	code := m.Run()
	if running != nil {
		if err := running.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			code = 1
		}
	}
	return code
}

func (s *server) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&sslmode=disable", db, s.dir)
}

func (s *server) exec(dsn, stmt string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(context.Background(), stmt)
	return err
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// asPostgres makes cmd run as nobody when we are root.
func asPostgres(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
}

// start makes a cluster in a temporary directory and starts its server,
// returning once it accepts connections.
func start(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, exit: make(chan struct{})}
	fail := func(err error) (*server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	asPostgres(initdb)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// Only a unix socket in dir; no durability, which tests do not need.
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "logging_collector=off")
	asPostgres(s.cmd)
	// If the test binary dies without stopping it, the server shuts down
	// (SIGQUIT: at once) instead of living on.
	s.cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	ready := make(chan struct{})
	// Ends with postgres's stderr, as it stops (Run).
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if strings.Contains(sc.Text(), "database system is ready to accept connections") {
				close(ready)
				io.Copy(&lockedLog{s}, stderr)
				break
			}
		}
		s.cmd.Wait()
		close(s.exit)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.exit:
		return fail(fmt.Errorf("postgres exited before it was ready: %v\n%s", s.cmd.ProcessState, s.logText()))
	}
}

// lockedLog appends to the server's log.
type lockedLog struct{ s *server }

func (l *lockedLog) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.log.Write(p)
}

// stop shuts the server down (SIGINT: fast shutdown), waits for it and
// removes its directory.
func (s *server) stop() error {
	err := s.cmd.Process.Signal(syscall.SIGINT)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping postgres: %w", err)
	}
	<-s.exit
	return os.RemoveAll(s.dir)
}
