package sqlstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/pgtest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// databases are the two the store runs on; dsn makes a fresh one.
var databases = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "blaise.db") }},
	{"postgres", pgtest.DSN},
}

// eachDB runs f against a fresh database of each kind.
func eachDB(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) { f(t, db.dsn(t)) })
	}
}

func newKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// transcriptDirs are the transcript directories of the databases the
// tests made, by dsn: a store opened again keeps its files.
var transcriptDirs sync.Map

// transcriptDir is the transcript directory of the database dsn names.
func transcriptDir(t testing.TB, dsn string) string {
	dir, _ := transcriptDirs.LoadOrStore(dsn, t.TempDir())
	return dir.(string)
}

func open(t testing.TB, dsn string, key []byte) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, key, transcriptDir(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSQLStoresPassTheStoreSuite: SQLite and PostgreSQL pass the behaviour
// suite of every store, as the file store does (blaise's tests): the three
// agree.
func TestSQLStoresPassTheStoreSuite(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store { return open(t, db.dsn(t), newKey()) })
		})
	}
}

// TestPersistedStateEncryptedAtRest: persisted plug state is encrypted at
// rest; another key gives an error naming the session and plug, not garbage;
// a row moved to another session or plug does not decrypt.
func TestPersistedStateEncryptedAtRest(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key := newKey()
		s := open(t, dsn, key)
		storetest.Create(t, s, "s1")
		storetest.Create(t, s, "s2")
		secret := []byte(`{"token":"very-secret-value"}`)
		if err := s.Persisted().Set(ctx, "s1", "wt", "blaise:worktree", secret); err != nil {
			t.Fatal(err)
		}
		if err := s.Persisted().Set(ctx, "s2", "wt", "blaise:worktree", []byte(`1`)); err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if err := s.read.row(ctx, "SELECT sealed FROM persisted WHERE session_id = ?", "s1").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("very-secret-value")) {
			t.Fatal("the stored row holds the value in clear")
		}

		other := open(t, dsn, newKey())
		_, _, err := other.Persisted().Get(ctx, "s1", "wt")
		testsupport.WantErr(t, err, "plug wt", "session s1", "cannot be decrypted (written with another key, or corrupt)")

		// s1's row copied over s2's.
		if _, err := s.writer().exec(ctx, "UPDATE persisted SET sealed = ? WHERE session_id = ?", raw, "s2"); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.Persisted().Get(ctx, "s2", "wt")
		testsupport.WantErr(t, err, "plug wt", "session s2", "cannot be decrypted")
		if got, _, err := s.Persisted().Get(ctx, "s1", "wt"); err != nil || !bytes.Equal(got, secret) {
			t.Errorf("Get = %s, %v", got, err)
		}
	})
}

// TestCorruptRecordNamesTheSession: a record row that does not decode is an
// error naming the session, and does not hide the other sessions.
func TestCorruptRecordNamesTheSession(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "good")
		storetest.Create(t, s, "bad")
		storetest.Create(t, s, "moved")
		ctx := context.Background()
		s.writer().exec(ctx, "UPDATE sessions SET record = ? WHERE id = ?", `{"id": "bad", "runs": `, "bad")
		s.writer().exec(ctx, "UPDATE sessions SET record = ? WHERE id = ?", `{"id": "good"}`, "moved")

		_, err := s.Session(ctx, "bad")
		testsupport.WantErr(t, err, "session bad: its stored record is corrupt: unexpected end of JSON input")
		_, err = s.UpdateSession(ctx, "bad", func(*lifecycle.Record) error { return nil })
		testsupport.WantErr(t, err, "session bad", "corrupt")
		_, err = s.Session(ctx, "moved")
		testsupport.WantErr(t, err, "session moved", `record of session "good"`)

		recs, err := s.Sessions(ctx)
		var broken *lifecycle.BrokenError
		if !errors.As(err, &broken) || len(broken.Records) != 2 {
			t.Fatalf("Sessions: %v, want a *blaise.BrokenError naming 2 records", err)
		}
		testsupport.WantErr(t, err, "session bad", "session moved")
		if len(recs) != 1 || recs[0].ID != "good" {
			t.Errorf("Sessions listed %v, want the healthy one", recs)
		}
	})
}

// TestMigrationsForwardOnly: migrations are recorded, applied once, and a
// database newer than the binary is refused.
func TestMigrationsForwardOnly(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, newKey())
		ms, err := schema()
		if err != nil {
			t.Fatal(err)
		}
		var n, max int
		if err := s.read.row(ctx, "SELECT COUNT(*), MAX(version) FROM schema_version").Scan(&n, &max); err != nil {
			t.Fatal(err)
		}
		if n != len(ms) || max != len(ms) {
			t.Errorf("schema_version has %d rows up to %d, want %d", n, max, len(ms))
		}
		storetest.Create(t, s, "kept")
		again := open(t, dsn, newKey()) // applies nothing twice
		if _, err := again.Session(ctx, "kept"); err != nil {
			t.Fatal(err)
		}

		if _, err := s.writer().exec(ctx, "INSERT INTO schema_version (version, applied) VALUES (?, 0)", len(ms)+1); err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, dsn, newKey(), t.TempDir())
		testsupport.WantErr(t, err, "has schema version", "newer than this blaise-agent's")
	})
}

// TestSQLiteWritesNeverBusy: SQLite has one writer: writes from many
// goroutines, and from a second store on the same file (another process),
// queue instead of failing with SQLITE_BUSY.
func TestSQLiteWritesNeverBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blaise.db")
	a, b := open(t, path, newKey()), open(t, path, newKey())
	storetest.Create(t, a, "counted")
	const goroutines, each = 6, 15
	var wg sync.WaitGroup
	for i := range goroutines {
		s := []*Store{a, b}[i%2]
		wg.Go(func() {
			for j := range each {
				if _, err := s.UpdateSession(t.Context(), "counted", func(r *lifecycle.Record) error { r.Runs++; return nil }); err != nil {
					t.Error(err)
					return
				}
				if err := s.Persisted().Set(context.Background(), "counted", "p", "x", []byte{'0' + byte(j%10)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if rec, err := a.Session(t.Context(), "counted"); err != nil || rec.Runs != goroutines*each {
		t.Errorf("Runs = %v, %v; want %d", rec, err, goroutines*each)
	}
}

// TestSQLiteFilesPrivate: a new SQLite database and its log are the server's
// user's only: they hold transcripts.
func TestSQLiteFilesPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blaise.db")
	s := open(t, path, newKey())
	storetest.Create(t, s, "s")
	for _, name := range []string{path, path + "-wal"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", name, perm)
		}
	}
}

// TestOpenRefusesBadInput: bad input to Open says what was expected and
// where.
func TestOpenRefusesBadInput(t *testing.T) {
	for dsn, want := range map[string]string{
		"":                    "want a file path, sqlite:PATH or postgres://",
		"mysql://h/db":        "want a file path, sqlite:PATH or postgres://",
		"sqlite:":             "want a SQLite file path",
		"/tmp/x.db?mode=ro":   "without '?'",
		"postgres://u:pw@%zz": "database URL",
	} {
		_, err := Open(t.Context(), dsn, newKey(), t.TempDir())
		testsupport.WantErr(t, err, want)
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	// A server that is not there: named, without the password.
	_, err := Open(t.Context(), "postgres://u:secret-pw@/db?host="+t.TempDir(), newKey(), t.TempDir())
	testsupport.WantErr(t, err, "database postgres://u:xxxxx@/db")
	if strings.Contains(err.Error(), "secret-pw") {
		t.Errorf("the error shows the password: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	_, err = Open(t.Context(), filepath.Join(missing, "x.db"), newKey(), t.TempDir())
	testsupport.WantErr(t, err, "SQLite database "+missing, "stat "+missing+": no such file or directory")
	path := filepath.Join(t.TempDir(), "x.db")
	if s := open(t, "sqlite:"+path, newKey()); s.String() != "SQLite database "+path {
		t.Errorf("String() = %q", s)
	}
	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), []byte("short"), t.TempDir())
	testsupport.WantErr(t, err, "store key", "holds 5 bytes, want 32")
}

// TestCurrentRunFencesWritesByRunNumber: the server fences a run's writes by
// the session's run number.
func TestCurrentRunFencesWritesByRunNumber(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		if _, err := s.UpdateSession(t.Context(), "s", func(r *lifecycle.Record) error { r.Runs = 3; r.State = lifecycle.Paused; return nil }); err != nil {
			t.Fatal(err)
		}
		if run, state, err := s.CurrentRun(t.Context(), "s"); run != 3 || state != lifecycle.Paused || err != nil {
			t.Errorf("CurrentRun = %d, %s, %v", run, state, err)
		}
		if _, _, err := s.CurrentRun(t.Context(), "nope"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("CurrentRun of an unknown session: %v", err)
		}
		if _, err := s.Transcript(t.Context(), "nope"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("Transcript of an unknown session: %v", err)
		}
	})
}

// TestLoadKeyFromEnvironmentOrPrivateFile: the store key comes from the
// environment (base64), or from a 0600 file made on first use; a looser file
// is refused.
func TestLoadKeyFromEnvironmentOrPrivateFile(t *testing.T) {
	const env = "BLAISE_TEST_STORE_KEY"
	dir := t.TempDir()
	file := filepath.Join(dir, "key")

	key := newKey()
	t.Setenv(env, base64.StdEncoding.EncodeToString(key))
	if got, err := LoadKey(file, env); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("from the environment: %x, %v", got, err)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a key from the environment made a key file")
	}
	t.Setenv(env, "not base64!")
	_, err := LoadKey(file, env)
	testsupport.WantErr(t, err, "$"+env, "base64")
	t.Setenv(env, base64.StdEncoding.EncodeToString([]byte("short")))
	_, err = LoadKey(file, env)
	testsupport.WantErr(t, err, "$"+env, "holds 5 bytes, want 32")

	t.Setenv(env, "")
	made, err := LoadKey(file, env)
	if err != nil || len(made) != 32 {
		t.Fatalf("a new key file: %x, %v", made, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	if again, err := LoadKey(file, env); err != nil || !bytes.Equal(again, made) {
		t.Errorf("reading the key file again: %x, %v", again, err)
	}
	os.Chmod(file, 0o640)
	_, err = LoadKey(file, env)
	testsupport.WantErr(t, err, file, "0640", "broader than 0600")
	_, err = LoadKey("", env)
	testsupport.WantErr(t, err, "no store key", "$"+env)
}

// L1: an agent's settings are validated and normalized:
// defaults filled in, the paused lifetime capped by the operator's
// SESSION_MAX_PAUSED_LIFETIME_MS; a bad name or setting writes nothing.
func TestL1_AgentSettingsNormalized(t *testing.T) {
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "7200000") // 2 h
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		a, err := s.CreateAgent(t.Context(), Agent{Name: "claude", Config: "agents/claude/blaise.star",
			Settings: lifecycle.Settings{PausedLifetime: 48 * time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		want := lifecycle.DefaultSettings()
		want.PausedLifetime = 2 * time.Hour
		if a.Settings != want {
			t.Errorf("settings %+v, want %+v", a.Settings, want)
		}
		got, err := s.Agent(t.Context(), "claude")
		if err != nil || got.Settings != want || got.Config != a.Config || !got.Created.Equal(a.Created) {
			t.Errorf("Agent = %+v, %v; want %+v", got, err, a)
		}

		_, err = s.CreateAgent(t.Context(), Agent{Name: "claude"})
		if !errors.Is(err, ErrExists) {
			t.Errorf("a duplicate: %v", err)
		}
		for _, name := range []string{"", "Claude", "-x", "a_b", strings.Repeat("a", 64)} {
			_, err := s.CreateAgent(t.Context(), Agent{Name: name})
			testsupport.WantErr(t, err, "invalid agent name")
		}
		_, err = s.CreateAgent(t.Context(), Agent{Name: "bad", Settings: lifecycle.Settings{IdlePolicy: "sleep"}})
		testsupport.WantErr(t, err, "agent bad", "idle policy: want pause or end")
		if _, err := s.Agent(t.Context(), "bad"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a refused agent was stored: %v", err)
		}

		_, err = s.UpdateAgent(t.Context(), "claude", func(a *Agent) error { a.Settings.IdlePolicy = "sleep"; return nil })
		testsupport.WantErr(t, err, "idle policy")
		u, err := s.UpdateAgent(t.Context(), "claude", func(a *Agent) error { a.Settings.IdlePolicy = lifecycle.PolicyEnd; return nil })
		if err != nil || u.Settings.IdlePolicy != lifecycle.PolicyEnd {
			t.Fatalf("UpdateAgent = %+v, %v", u, err)
		}
		if got, _ := s.Agent(t.Context(), "claude"); got.Settings.IdlePolicy != lifecycle.PolicyEnd || got.Settings.PausedLifetime != 2*time.Hour {
			t.Errorf("after updates: %+v", got.Settings)
		}
		_, err = s.UpdateAgent(t.Context(), "claude", func(a *Agent) error { a.Name = "other"; return nil })
		testsupport.WantErr(t, err, "may not change the name")

		if _, err := s.CreateAgent(t.Context(), Agent{Name: "b-2"}); err != nil {
			t.Fatal(err)
		}
		all, err := s.Agents(t.Context())
		if err != nil || len(all) != 2 || all[0].Name != "b-2" || all[1].Name != "claude" {
			t.Errorf("Agents = %v, %v", all, err)
		}
		if err := s.DeleteAgent(t.Context(), "b-2"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteAgent(t.Context(), "b-2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting again: %v", err)
		}
		if _, err := s.UpdateAgent(t.Context(), "b-2", func(*Agent) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Errorf("updating a deleted agent: %v", err)
		}
	})
}

// TestRegistrationTokenExchangedOnce: a registration token is stored hashed,
// expires, and is exchanged once (even by racing runners) for a revocable
// runner credential.
func TestRegistrationTokenExchangedOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		clock := lifecycle.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		s.Clock = clock
		reg, err := s.MintRegistration(t.Context(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(reg.Token, RegistrationPrefix) {
			t.Errorf("token %q lacks its prefix", reg.Token)
		}
		var hash []byte
		s.read.row(context.Background(), "SELECT hash FROM registration_tokens WHERE id = ?", reg.ID).Scan(&hash)
		if len(hash) != 32 || bytes.Contains(hash, []byte(reg.Token[4:])) {
			t.Errorf("the stored hash is %x", hash)
		}

		const racers = 6
		creds := make([]string, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { creds[i], _, errs[i] = s.Register(t.Context(), reg.Token, "runner-1") })
		}
		wg.Wait()
		var cred string
		for i, err := range errs {
			switch {
			case err == nil && cred != "":
				t.Fatal("the token was exchanged twice")
			case err == nil:
				cred = creds[i]
			case !errors.Is(err, ErrBadToken):
				t.Fatalf("a losing racer: %v", err)
			}
		}
		if !strings.HasPrefix(cred, RunnerPrefix) {
			t.Fatalf("credential %q", cred)
		}
		_, _, err = s.Register(t.Context(), reg.Token, "runner-2")
		testsupport.WantErr(t, err, "already used", "runner")

		clock.Advance(time.Minute)
		r, err := s.RunnerByCredential(t.Context(), cred)
		if err != nil || r.Name != "runner-1" || !r.LastSeen.Equal(clock.Now()) {
			t.Fatalf("RunnerByCredential = %+v, %v", r, err)
		}
		if _, err := s.RunnerByCredential(t.Context(), RunnerPrefix+strings.Repeat("A", 43)); !errors.Is(err, ErrBadToken) {
			t.Errorf("an unknown credential: %v", err)
		}
		if _, err := s.RunnerByCredential(t.Context(), reg.Token); !errors.Is(err, ErrBadToken) {
			t.Errorf("a registration token as a credential: %v", err)
		}
		if err := s.RevokeRunner(t.Context(), r.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeRunner(t.Context(), r.ID); err != nil {
			t.Errorf("revoking again: %v", err)
		}
		_, err = s.RunnerByCredential(t.Context(), cred)
		testsupport.WantErr(t, err, "unknown or revoked")
		if err := s.RevokeRunner(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking an unknown runner: %v", err)
		}
		runners, err := s.Runners(t.Context())
		if err != nil || len(runners) != 1 || runners[0].Revoked.IsZero() {
			t.Errorf("Runners = %+v, %v", runners, err)
		}

		late, err := s.MintRegistration(t.Context(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		_, _, err = s.Register(t.Context(), late.Token, "runner-3")
		testsupport.WantErr(t, err, "expired at", "mint another")
		_, _, err = s.Register(t.Context(), RegistrationPrefix+strings.Repeat("A", 43), "runner-3")
		testsupport.WantErr(t, err, "no such token")
		_, _, err = s.Register(t.Context(), late.Token, "Runner 3")
		testsupport.WantErr(t, err, "invalid runner name")
		if _, err := s.MintRegistration(t.Context(), 0); err == nil {
			t.Error("a token of no lifetime was minted")
		}
		regs, err := s.Registrations(t.Context())
		if err != nil || len(regs) != 2 || regs[0].ID != reg.ID || regs[0].RunnerID != r.ID || regs[0].Used.IsZero() ||
			!regs[1].Used.IsZero() || regs[1].Token != "" {
			t.Errorf("Registrations = %+v, %v", regs, err)
		}
	})
}

// TestAPITokensRevocable: API tokens are named, stored hashed and revocable.
func TestAPITokensRevocable(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		tok, id, err := s.MintAPIToken(t.Context(), "editor of ada")
		if err != nil || !strings.HasPrefix(tok, APIPrefix) {
			t.Fatalf("MintAPIToken = %q, %v", tok, err)
		}
		if got, err := s.APIToken(t.Context(), tok); err != nil || got.ID != id || got.Name != "editor of ada" || got.LastUsed.IsZero() {
			t.Fatalf("APIToken = %+v, %v", got, err)
		}
		if _, err := s.APIToken(t.Context(), tok[:len(tok)-1]); !errors.Is(err, ErrBadToken) {
			t.Errorf("a truncated token: %v", err)
		}
		// A token of another kind is named for what it is.
		cred := RunnerPrefix + tok[len(APIPrefix):]
		if _, err := s.APIToken(t.Context(), cred); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "this is a runner's credential (blc_…); want bla_ followed by 43 characters") {
			t.Errorf("a runner's credential as an API token: %v", err)
		}
		if err := s.RevokeAPIToken(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.APIToken(t.Context(), tok); !errors.Is(err, ErrBadToken) {
			t.Errorf("a revoked token: %v", err)
		}
		if err := s.RevokeAPIToken(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking an unknown token: %v", err)
		}
		if _, _, err := s.MintAPIToken(t.Context(), " "); err == nil {
			t.Error("a token without a name was minted")
		}
		all, err := s.APITokens(t.Context())
		if err != nil || len(all) != 1 || all[0].Revoked.IsZero() {
			t.Errorf("APITokens = %+v, %v", all, err)
		}
	})
}

// An unused registration token revoked expires at once: no runner
// registers with it. A used or expired one stays as it was; an unknown id
// is not found.
func TestRevokedRegistrationTokenRegistersNoRunner(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		clock := lifecycle.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		s.Clock = clock
		unused, _ := s.MintRegistration(t.Context(), time.Hour)
		used, _ := s.MintRegistration(t.Context(), time.Hour)
		if _, _, err := s.Register(t.Context(), used.Token, "r1"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		for _, id := range []string{unused.ID, used.ID} {
			if err := s.RevokeRegistration(t.Context(), id); err != nil {
				t.Fatalf("revoking %s: %v", id, err)
			}
		}
		_, _, err := s.Register(t.Context(), unused.Token, "r2")
		testsupport.WantErr(t, err, "expired at 2026-01-02T03:05:05Z")
		regs, _ := s.Registrations(t.Context())
		i := slices.IndexFunc(regs, func(r *Registration) bool { return r.ID == used.ID })
		if i < 0 || !regs[i].Expires.Equal(used.Expires) || regs[i].Used.IsZero() {
			t.Errorf("the used token after a revocation: %+v", regs)
		}
		if err := s.RevokeRegistration(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking an unknown token: %v", err)
		}
	})
}
