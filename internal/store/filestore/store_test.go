package filestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// The test binary doubles as a child process: with storeChildEnv set, TestMain
// runs the child's job instead of the tests.
const (
	storeChildEnv = "BLAISE_STORE_TEST_CHILD" // "increment" or "setloop"
	storeDirEnv   = "BLAISE_STORE_TEST_DIR"
	storeNEnv     = "BLAISE_STORE_TEST_N"
)

func TestMain(m *testing.M) {
	if job := os.Getenv(storeChildEnv); job != "" {
		if err := storeChild(job); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func storeChild(job string) error {
	s, err := OpenStore(os.Getenv(storeDirEnv))
	if err != nil {
		return err
	}
	switch job {
	case "increment":
		n, err := strconv.Atoi(os.Getenv(storeNEnv))
		if err != nil {
			return err
		}
		for range n {
			if _, err := s.UpdateSession(context.Background(), "counted", func(r *lifecycle.Record) error {
				r.Runs++
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	case "setloop":
		// Set alternating values until killed, telling the parent which
		// value it is about to write.
		p := s.Persisted()
		out := bufio.NewWriter(os.Stdout)
		for i := 0; ; i++ {
			fmt.Fprintln(out, i)
			out.Flush()
			if err := p.Set(context.Background(), "killed", "plug", "blaise:test", killValue(i)); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown job %q", job)
}

// killValue is the i'th value the setloop child writes: JSON strings of
// 64 KiB and 128 KiB in turn, each naming i.
func killValue(i int) []byte {
	size := 64 << 10
	if i%2 == 1 {
		size = 128 << 10
	}
	prefix := fmt.Sprintf("%d:", i)
	return []byte(`"` + prefix + strings.Repeat("x", size-len(prefix)) + `"`)
}

func openTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func createSession(t *testing.T, s *Store, id string) *lifecycle.Record {
	t.Helper()
	return storetest.Create(t, s, id)
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	testsupport.WantErr(t, err, parts...)
}

func TestOpenStoreLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	for name, perm := range map[string]fs.FileMode{".": 0o700, "key": 0o600, "lock": 0o600, "sessions": 0o700} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != perm {
			t.Errorf("%s: mode %04o, want %04o", name, got, perm)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "version")); err != nil || string(data) != "1\n" {
		t.Errorf("version file: %q, %v", data, err)
	}
	key, _ := os.ReadFile(filepath.Join(dir, "key"))
	if len(key) != 32 {
		t.Errorf("key is %d bytes", len(key))
	}

	// Opening again keeps the key.
	if _, err := OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	if key2, _ := os.ReadFile(filepath.Join(dir, "key")); !bytes.Equal(key, key2) {
		t.Error("reopening changed the key")
	}
}

func TestOpenStoreRace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = OpenStore(dir) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if got := DefaultStateDir(); got != "/x/state/blaise-agent" {
		t.Errorf("with XDG_STATE_HOME: %q", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultStateDir(); got != "/home/u/.local/state/blaise-agent" {
		t.Errorf("without XDG_STATE_HOME: %q", got)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(dir)
	wantErr(t, err, key, "0644", "broader than 0600")

	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenStore(dir)
	wantErr(t, err, key, "holds 5 bytes, want 32")
}

func TestForeignStateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(dir)
	wantErr(t, err, "not a blaise-agent state directory", filepath.Join(dir, "notes.txt"))
	if _, err := os.Stat(filepath.Join(dir, "lock")); err == nil {
		t.Error("refusing a directory left a lock file in it")
	}

	dir = t.TempDir()
	if _, err := OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(dir, "version")
	os.WriteFile(version, []byte("2\n"), 0o600)
	_, err = OpenStore(dir)
	wantErr(t, err, version, "format version 2", "reads version 1")

	os.WriteFile(version, []byte("{}"), 0o600)
	_, err = OpenStore(dir)
	wantErr(t, err, version, "not a blaise-agent version file")

	// Foreign files where Sessions and PersistedIDs read.
	os.WriteFile(version, []byte("1\n"), 0o600)
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	createSession(t, s, "s1")
	junk := filepath.Join(dir, "sessions", "s1", "persisted", "junk.txt")
	os.MkdirAll(filepath.Dir(junk), 0o700)
	os.WriteFile(junk, nil, 0o600)
	_, err = s.PersistedIDs(t.Context(), "s1")
	wantErr(t, err, junk, "not a persisted state file")
	junk = filepath.Join(dir, "sessions", "junk.txt")
	os.WriteFile(junk, nil, 0o600)
	_, err = s.Sessions(t.Context())
	wantErr(t, err, junk, "not a session directory")
}

// TestSessionFiles: how the file store lays a session out (the round trip
// itself: the store suite).
func TestSessionFiles(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "a")
	data, err := os.ReadFile(filepath.Join(s.Dir(), "sessions", "a", "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("{\n  \"id\": ")) {
		t.Errorf("session.json is not indented JSON:\n%s", data)
	}

	// A session directory without session.json (its creator was killed)
	// is no session, and can be created.
	os.Mkdir(filepath.Join(s.Dir(), "sessions", "half"), 0o700)
	if all, _ := s.Sessions(t.Context()); len(all) != 1 {
		t.Errorf("Sessions() lists %d sessions, want 1", len(all))
	}
	createSession(t, s, "half")

	if p := s.TranscriptPath("a"); p != filepath.Join(s.Dir(), "sessions", "a", "transcript.jsonl") {
		t.Errorf("TranscriptPath = %q", p)
	}
	if fi, err := os.Stat(filepath.Dir(s.TranscriptPath("a"))); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("session directory: %v, %v", fi, err)
	}
}

// TestFileStorePassesTheStoreSuite: the file store passes the behaviour
// suite of every store (its ids, invalid ids, atomic updates, persisted
// state, reports, transcripts); the tests below are of what is its own.
func TestFileStorePassesTheStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openTestStore(t) })
}

func TestTranscriptPathOfInvalidID(t *testing.T) {
	s := openTestStore(t)
	for _, id := range []string{"", "..", "../x", "a/b"} {
		if s.TranscriptPath(id) != "" {
			t.Errorf("TranscriptPath(%q) is not empty", id)
		}
	}
}

func TestCorruptSession(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "s")
	name := filepath.Join(s.Dir(), "sessions", "s", "session.json")
	os.WriteFile(name, []byte(`{"id": "s", "runs": `), 0o600)
	_, err := s.Session(t.Context(), "s")
	wantErr(t, err, "session s: state file "+name+" is corrupt: unexpected end of JSON input")
	_, err = s.UpdateSession(t.Context(), "s", func(*lifecycle.Record) error { return nil })
	wantErr(t, err, "is corrupt")
	_, err = s.Sessions(t.Context())
	wantErr(t, err, "is corrupt")

	os.WriteFile(name, []byte(`{"id": "other"}`), 0o600)
	_, err = s.Session(t.Context(), "s")
	wantErr(t, err, name, "is corrupt", `record of session "other"`)
}

// TestConcurrentUpdates: goroutines each with a Store of its own, like
// other processes (goroutines sharing one: the store suite).
func TestConcurrentUpdates(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "counted")
	var stores []lifecycle.Sessions
	for range 8 {
		o, err := OpenStore(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, o)
	}
	storetest.Increments(t, "counted", 25, stores...)
}

func childCmd(t *testing.T, job, dir string, extra ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), storeChildEnv+"="+job, storeDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestConcurrentProcesses(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "counted")
	const procs, each = 3, 40
	var cmds []*exec.Cmd
	for range procs {
		cmd := childCmd(t, "increment", s.Dir(), storeNEnv+"="+strconv.Itoa(each))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// This process takes part too.
	for range each {
		if _, err := s.UpdateSession(t.Context(), "counted", func(r *lifecycle.Record) error { r.Runs++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	rec, err := s.Session(t.Context(), "counted")
	if err != nil {
		t.Fatal(err)
	}
	if want := (procs + 1) * each; rec.Runs != want {
		t.Errorf("Runs = %d, want %d", rec.Runs, want)
	}
}

func TestPersisted(t *testing.T) {
	s := openTestStore(t)
	p := s.Persisted()
	ctx := context.Background()

	createSession(t, s, "s1")
	createSession(t, s, "s2")
	secret := []byte(`{ "branch": "secret-branch-name", "n": [1, 2] }`)
	if err := p.Set(ctx, "s1", "wt", "blaise:worktree", secret); err != nil {
		t.Fatal(err)
	}

	// Encrypted at rest.
	file := filepath.Join(s.Dir(), "sessions", "s1", "persisted", "wt.bin")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{"secret-branch-name", "branch", "blaise:worktree"} {
		if bytes.Contains(raw, []byte(plain)) {
			t.Errorf("the file holds %q in clear", plain)
		}
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o", fi.Mode().Perm())
	}

	// Overwrite; a new nonce every time.
	if err := p.Set(ctx, "s1", "wt", "blaise:worktree", secret); err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(file)
	if bytes.Equal(raw, raw2) {
		t.Error("two writes of one value gave the same file")
	}

	// A file copied to another plug or session does not decrypt.
	for _, to := range [][2]string{{"s1", "other"}, {"s2", "wt"}} {
		dst := filepath.Join(s.Dir(), "sessions", to[0], "persisted", to[1]+".bin")
		os.MkdirAll(filepath.Dir(dst), 0o700)
		os.WriteFile(dst, raw, 0o600)
		_, _, err := p.Get(ctx, to[0], to[1])
		wantErr(t, err, fmt.Sprintf("persisted state of plug %s in session %s cannot be decrypted (written with another key, or corrupt): %s", to[1], to[0], dst))
	}

	// Another key.
	other := openTestStore(t)
	createSession(t, other, "s1")
	dst := filepath.Join(other.Dir(), "sessions", "s1", "persisted", "wt.bin")
	os.MkdirAll(filepath.Dir(dst), 0o700)
	os.WriteFile(dst, raw, 0o600)
	_, _, err = other.Persisted().Get(ctx, "s1", "wt")
	wantErr(t, err, "cannot be decrypted (written with another key, or corrupt)")

	// Damaged and foreign files.
	damaged := bytes.Clone(raw)
	damaged[len(damaged)-1] ^= 1
	os.WriteFile(file, damaged, 0o600)
	_, _, err = p.Get(ctx, "s1", "wt")
	wantErr(t, err, "cannot be decrypted", file)
	os.WriteFile(file, raw[:10], 0o600)
	_, _, err = p.Get(ctx, "s1", "wt")
	wantErr(t, err, "cannot be decrypted", file)
	os.WriteFile(file, []byte("hello"), 0o600)
	_, _, err = p.Get(ctx, "s1", "wt")
	wantErr(t, err, file, "not a blaise-agent persisted state file")
	os.WriteFile(file, append([]byte("BLPS\x07"), raw[5:]...), 0o600)
	_, _, err = p.Get(ctx, "s1", "wt")
	wantErr(t, err, file, "format version 7")

	// DeletePersisted removes the directory.
	if err := s.DeletePersisted(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "sessions", "s1", "persisted")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the persisted directory is still there: %v", err)
	}
}

func TestPersistedContext(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "s")
	p := s.Persisted()

	// Hold the exclusive lock from another UpdateSession.
	release := storetest.HoldUpdate(t, s, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.Set(ctx, "s", "wt", "x", []byte(`1`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Set while locked = %v, want a deadline error", err)
	}
	_, _, err = p.Get(ctx, "s", "wt")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get while locked = %v, want a deadline error", err)
	}
	release()
	if err := p.Set(context.Background(), "s", "wt", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
}

func TestTempFilesIgnored(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "s")
	p := s.Persisted()
	ctx := context.Background()
	if err := p.Set(ctx, "s", "wt", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(s.Dir(), "sessions", "s", "persisted")
	sdir := filepath.Join(s.Dir(), "sessions", "s")
	tmps := []string{
		filepath.Join(pdir, ".wt.bin.tmp-123"),
		filepath.Join(sdir, ".session.json.tmp-456"),
	}
	for _, tmp := range tmps {
		if err := os.WriteFile(tmp, []byte("half a wri"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := s.PersistedIDs(ctx, "s"); err != nil || !reflect.DeepEqual(ids, []string{"wt"}) {
		t.Errorf("PersistedIDs = %v, %v", ids, err)
	}
	if v, ok, err := p.Get(ctx, "s", "wt"); string(v) != "1" || !ok || err != nil {
		t.Errorf("Get = %s, %v, %v", v, ok, err)
	}
	if _, err := s.Sessions(ctx); err != nil {
		t.Error(err)
	}
	// The next writes clean up.
	if err := p.Set(ctx, "s", "wt", "x", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSession(ctx, "s", func(*lifecycle.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tmp := range tmps {
		if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there", tmp)
		}
	}
}

// TestKillDuringSet kills a process looping persisted Set with SIGKILL at
// random moments; every time, Get returns one of the values written.
func TestKillDuringSet(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := openTestStore(t)
	createSession(t, s, "killed")
	p := s.Persisted()
	ctx := context.Background()
	started := -1 // the last value any child began to write
	for round := range 10 {
		cmd := childCmd(t, "setloop", s.Dir())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until it writes (most rounds), then a random while.
		lines := bufio.NewScanner(out)
		if !lines.Scan() {
			t.Fatalf("round %d: the child said nothing", round)
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		last := -1
		for {
			if n, err := strconv.Atoi(lines.Text()); err == nil {
				last = n
			}
			if !lines.Scan() {
				break
			}
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("round %d: the child exited by itself", round)
		}
		// The child's i restarts at 0 every round; any value it wrote
		// is i's value with i <= last, and before it started, the old
		// one. A value is one of the two sizes with its index inside.
		got, ok, err := p.Get(ctx, "killed", "plug")
		if err != nil {
			t.Fatalf("round %d: Get after kill: %v", round, err)
		}
		if !ok {
			if started >= 0 {
				t.Fatalf("round %d: the value is gone", round)
			}
			t.Logf("round %d: killed before the first write", round)
			continue
		}
		var str string
		if err := json.Unmarshal(got, &str); err != nil {
			t.Fatalf("round %d: the value is not a JSON string: %v", round, err)
		}
		i, err := strconv.Atoi(str[:strings.IndexByte(str, ':')])
		if err != nil || !bytes.Equal(got, killValue(i)) {
			t.Fatalf("round %d: a value never written (%d bytes)", round, len(got))
		}
		if i > max(last, started) {
			t.Fatalf("round %d: value %d, but the child only began %d", round, i, last)
		}
		t.Logf("round %d: child began %d, value %d", round, last, i)
		started = max(started, last)
	}
}

// TestBrokenRecordsDoNotHideTheOthers: records that cannot be read
// (truncated, garbage, a directory where the file should be, unreadable, a
// stray file) are each named with their path and what is wrong, and the
// healthy sessions are still listed.
func TestBrokenRecordsDoNotHideTheOthers(t *testing.T) {
	s := openTestStore(t)
	createSession(t, s, "good1")
	createSession(t, s, "good2")
	sessions := filepath.Join(s.Dir(), "sessions")
	want := map[string]string{} // path → what the error says
	broken := func(id string, make func(name string) error, says string) {
		t.Helper()
		createSession(t, s, id)
		name := filepath.Join(sessions, id, "session.json")
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
		if err := make(name); err != nil {
			t.Fatal(err)
		}
		want[name] = says
	}
	write := func(data string) func(string) error {
		return func(name string) error { return os.WriteFile(name, []byte(data), 0o600) }
	}
	broken("truncated", write(`{"id": "truncated", "runs": `), "is corrupt: unexpected end of JSON input")
	broken("garbage", write("\x00\x01garbage"), "is corrupt: invalid character")
	broken("directory", func(name string) error { return os.Mkdir(name, 0o700) }, "is a directory")
	// A symbolic link to itself cannot be read, even by root.
	broken("loop", func(name string) error { return os.Symlink("session.json", name) }, "too many levels of symbolic links")
	if os.Geteuid() != 0 {
		broken("unreadable", func(name string) error {
			if err := os.WriteFile(name, []byte(`{"id": "unreadable"}`), 0o600); err != nil {
				return err
			}
			return os.Chmod(name, 0)
		}, "permission denied")
	}
	stray := filepath.Join(sessions, "stray.txt")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want[stray] = "is not a session directory"

	recs, err := s.Sessions(t.Context())
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if !reflect.DeepEqual(ids, []string{"good1", "good2"}) {
		t.Errorf("Sessions listed %q, want the healthy good1 and good2", ids)
	}
	var be *lifecycle.BrokenError
	if !errors.As(err, &be) {
		t.Fatalf("Sessions: %v, want a *lifecycle.BrokenError", err)
	}
	if len(be.Records) != len(want) {
		t.Errorf("%d broken records, want %d: %v", len(be.Records), len(want), err)
	}
	for _, r := range be.Records {
		says, ok := want[r.Path]
		if !ok {
			t.Errorf("unexpected broken record %s: %v", r.Path, r.Err)
			continue
		}
		if msg := r.Err.Error(); !strings.Contains(msg, r.Path) || !strings.Contains(msg, says) {
			t.Errorf("broken record %s: %q, want its path and %q", r.Path, msg, says)
		}
		if !strings.Contains(err.Error(), r.Err.Error()) {
			t.Errorf("the error does not name %s:\n%v", r.Path, err)
		}
	}
}

// TestStoreExistsCreatesNothing: asking whether a state directory exists
// leaves the file system as it was.
func TestStoreExistsCreatesNothing(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "a", "state")
	empty := filepath.Join(parent, "empty")
	foreign := filepath.Join(parent, "foreign")
	os.Mkdir(empty, 0o700)
	os.Mkdir(foreign, 0o700)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), nil, 0o600)
	store := openTestStore(t).Dir()
	for dir, want := range map[string]bool{missing: false, empty: false, foreign: true, store: true} {
		if ok, err := StoreExists(dir); err != nil || ok != want {
			t.Errorf("StoreExists(%s) = %v, %v; want %v", dir, ok, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(parent, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("StoreExists made %s: %v", filepath.Join(parent, "a"), err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("StoreExists wrote into the empty directory: %v", entries)
	}
}
