package sqlstore

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
	"github.com/klauspost/compress/flate"
)

// A burst of reads queues for the pool's connections instead of opening
// one each, and what it opened beyond the idle ones is closed after it.
func TestReadPoolIsBoundedAndShrinksAfterABurst(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s1")
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if _, err := s.Session(t.Context(), "s1"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		st := s.db.Stats()
		if st.MaxOpenConnections != MaxConns {
			t.Errorf("pool bound %d, want %d", st.MaxOpenConnections, MaxConns)
		}
		if st.OpenConnections > maxIdleConns {
			t.Errorf("%d connections open after the burst, want at most %d", st.OpenConnections, maxIdleConns)
		}
	})
}

func TestReadyChecksTheSchemaVersion(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		if err := s.Ready(context.Background()); err != nil {
			t.Fatalf("a migrated store: %v", err)
		}
		if _, err := s.write.Exec(s.d.rebind("DELETE FROM schema_version WHERE version = (SELECT MAX(version) FROM schema_version)")); err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(context.Background()); err == nil {
			t.Error("a store missing a migration is ready")
		}
	})
}

// openAt opens a store whose database has the migrations up to version.
func openAt(t *testing.T, dsn string, key []byte, version int) *Store {
	t.Helper()
	read, write, d, where, err := connect(dsn)
	if err != nil {
		t.Fatal(err)
	}
	box, err := sealed.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(read, write, d, where, box, transcriptDir(t, dsn))
	ms, err := schema()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.migrateTo(context.Background(), ms, version); err != nil {
		t.Fatal(err)
	}
	return s
}

// A database made by the first schema version, with rows in each of its
// tables, is brought up to the current one and reads the same.
func TestUpgradeFromTheFirstSchemaKeepsEveryTable(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key := newKey()
		old := openAt(t, dsn, key, 1)
		// The session's row as the first schema has it: the store's code
		// of today writes columns added since.
		rec := &lifecycle.Record{ID: "s1", Config: "/w/blaise.star", AgentName: "a", State: lifecycle.Paused, Runs: 1,
			Created: time.Unix(1, 0).UTC(), Updated: time.Unix(2, 0).UTC(), Settings: lifecycle.DefaultSettings()}
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.writer().exec(ctx, "INSERT INTO sessions (id, agent_name, state, runs, created, updated, record) VALUES (?, ?, ?, ?, ?, ?, ?)",
			rec.ID, rec.AgentName, string(rec.State), rec.Runs, rec.Created.UnixMilli(), rec.Updated.UnixMilli(), string(data)); err != nil {
			t.Fatal(err)
		}
		if err := old.Persisted().Set(ctx, "s1", "wt", "blaise:worktree", []byte(`{"branch":"b"}`)); err != nil {
			t.Fatal(err)
		}
		var packed bytes.Buffer
		fw, _ := flate.NewWriter(&packed, flate.BestSpeed)
		fw.Write([]byte("{\"line\":1}\n"))
		fw.Close()
		if _, err := old.writer().exec(ctx, "INSERT INTO transcript_chunks (session_id, lines) VALUES (?, ?)", "s1", packed.Bytes()); err != nil {
			t.Fatal(err)
		}
		if _, err := old.CreateAgent(ctx, Agent{Name: "a", Config: "/w/blaise.star"}); err != nil {
			t.Fatal(err)
		}
		reg, err := old.MintRegistration(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cred, _, err := old.Register(ctx, reg.Token, "r1")
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := old.MintAPIToken(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		old.Close()

		s := open(t, dsn, key)
		if err := s.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Session(ctx, "s1"); err != nil || got.AgentName != "a" || got.State != lifecycle.Paused {
			t.Errorf("session: %+v, %v", got, err)
		}
		// The columns added since are filled for it: a list by state finds it.
		if page, err := s.ListSessions(ctx, ListQuery{State: string(lifecycle.Paused), Limit: 10}); err != nil || len(page.Sessions) != 1 {
			t.Errorf("the paused sessions after the upgrade: %v, %v", page.Sessions, err)
		}
		if v, ok, err := s.Persisted().Get(ctx, "s1", "wt"); err != nil || !ok || string(v) != `{"branch":"b"}` {
			t.Errorf("persisted state: %s, %v, %v", v, ok, err)
		}
		if got := storetest.ReadTranscript(t, s, "s1"); got != "{\"line\":1}\n" {
			t.Errorf("transcript %q", got)
		}
		if a, err := s.Agent(ctx, "a"); err != nil || a.Config != "/w/blaise.star" {
			t.Errorf("agent: %+v, %v", a, err)
		}
		if r, err := s.RunnerByCredential(ctx, cred); err != nil || r.Name != "r1" {
			t.Errorf("runner: %+v, %v", r, err)
		}
		if regs, err := s.Registrations(ctx); err != nil || len(regs) != 1 {
			t.Errorf("registrations: %v, %v", regs, err)
		}
		if a, err := s.APIToken(ctx, tok); err != nil || a.Name != "alice" {
			t.Errorf("API token: %+v, %v", a, err)
		}
	})
}

// A backup taken while the store writes, extracted into a fresh
// directory with the key, is a store with the same sessions, their
// decrypted state and their transcripts.
func TestBackupRestoresIntoAFreshDataDirectory(t *testing.T) {
	dir := t.TempDir()
	key := newKey()
	s, err := Open(t.Context(), filepath.Join(dir, "blaise.db"), key, filepath.Join(dir, "transcripts"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s)
	// Writes go on during the backup; it holds what was committed before
	// its snapshot, and what it holds reads whole.
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w, err := s.Transcript(t.Context(), "s1")
			if err != nil {
				t.Error(err)
				return
			}
			io.WriteString(w, "{\"more\":true}\n")
			w.Close()
		}
	}()
	file := filepath.Join(t.TempDir(), "backup.tar")
	err = s.Backup(t.Context(), file)
	close(stop)
	<-writing
	if err != nil {
		t.Fatal(err)
	}

	fresh := t.TempDir()
	extract(t, file, fresh)
	r, err := Open(t.Context(), filepath.Join(fresh, BackupDB), key, filepath.Join(fresh, BackupTranscripts))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	holdsWhatFillWrote(t, r)
	got := storetest.ReadTranscript(t, r, "s1")
	if want := "{\"n\":1}\n"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("transcript starts %q, want %q", got, want)
	}
	for line := range bytes.Lines([]byte(got)[len("{\"n\":1}\n"):]) {
		if string(line) != "{\"more\":true}\n" {
			t.Fatalf("a torn line in the restored transcript: %q", line)
		}
	}
	// Another key does not open the state.
	other, err := Open(t.Context(), filepath.Join(fresh, BackupDB), newKey(), filepath.Join(fresh, BackupTranscripts))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.Persisted().Get(t.Context(), "s1", "wt"); err == nil {
		t.Error("the state opened with another key")
	}
}

func TestBackupOfPostgreSQLSaysToUsePgDump(t *testing.T) {
	dsn := databases[1].dsn(t)
	s := open(t, dsn, newKey())
	err := s.Backup(context.Background(), filepath.Join(t.TempDir(), "b.tar"))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("pg_dump")) {
		t.Errorf("err = %v, want one naming pg_dump", err)
	}
}

// extract unpacks the tar archive file into dir.
func extract(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		os.MkdirAll(filepath.Dir(path), 0o700)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The procedure docs/server.md#backups gives for PostgreSQL: pg_dump,
// then the transcripts; pg_restore into an empty database, the
// transcripts beside, and the same key: the same sessions, state and
// transcripts.
func TestPgDumpAndRestoreKeepTheStore(t *testing.T) {
	dsn := databases[1].dsn(t)
	key := newKey()
	s := open(t, dsn, key)
	fill(t, s)

	bin := pgtest.BinDir()
	dump := filepath.Join(t.TempDir(), "blaise.pgdump")
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=custom", "--file="+dump, dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	copied := filepath.Join(t.TempDir(), "transcripts")
	if out, err := exec.Command("cp", "-a", transcriptDir(t, dsn), copied).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	target := databases[1].dsn(t)
	if out, err := exec.Command(filepath.Join(bin, "pg_restore"), "--no-owner", "--dbname="+target, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	transcriptDirs.Store(target, copied)
	r := open(t, target, key)
	if err := r.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsWhatFillWrote(t, r)
	if got := storetest.ReadTranscript(t, r, "s1"); got != "{\"n\":1}\n" {
		t.Errorf("transcript %q", got)
	}
}

// fill writes a session s1 with persisted state and a transcript line.
func fill(t *testing.T, s *Store) {
	t.Helper()
	storetest.Create(t, s, "s1")
	if err := s.Persisted().Set(context.Background(), "s1", "wt", "blaise:worktree", []byte(`"secret"`)); err != nil {
		t.Fatal(err)
	}
	w, err := s.Transcript(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "{\"n\":1}\n")
	w.Close()
}

// holdsWhatFillWrote checks the session and state fill wrote (its
// transcript is checked by the caller: a backup may hold more).
func holdsWhatFillWrote(t *testing.T, r *Store) {
	t.Helper()
	if rec, err := r.Session(t.Context(), "s1"); err != nil || rec.Config != "/w/blaise.star" {
		t.Errorf("session: %+v, %v", rec, err)
	}
	if v, ok, err := r.Persisted().Get(context.Background(), "s1", "wt"); err != nil || !ok || string(v) != `"secret"` {
		t.Errorf("persisted state: %s, %v, %v", v, ok, err)
	}
}
