// Package storetest is the behaviour suite of session.Store: the file
// store of one machine and the server's SQL stores run it alike, which is
// what says that they agree.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// Store is what the suite tests: a lifecycle.Store, which reads its
// transcripts back.
type Store interface {
	lifecycle.Store
}

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) Store) {
	tests := []struct {
		name string
		f    func(*testing.T, Store)
	}{
		{"RoundTrip", roundTrip},
		{"UnknownSession", unknownSession},
		{"InvalidIDs", invalidIDs},
		{"UpdateIsAtomic", updateIsAtomic},
		{"ConcurrentUpdatesAllCount", concurrentUpdates},
		{"ListedByCreatedThenID", listing},
		{"DueSessionsAreWhatASweepNeeds", dueSessions},
		{"Persisted", persistedState},
		{"SetHonoursItsContext", setHonoursContext},
		{"Reports", reports},
		{"TitledSetsTheTitleAndLaterUpdatesKeepIt", titled},
		{"ATitleAPersonSetWinsOverDerivedOnes", titleSet},
		{"TornDownDeletesPersistedState", tornDown},
		{"Discard", discard},
		{"PlugLogIsKeptPerRunAndGoesWithTheSession", plugLog},
		{"Transcript", transcript},
		{"TranscriptKeepsItsLastCall", transcriptCalls},
		{"NewSessionID", newSessionID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
}

// Create stores a new active session id with the default settings.
func Create(t testing.TB, s lifecycle.Sessions, id string) *lifecycle.Record {
	t.Helper()
	rec := &lifecycle.Record{ID: id, Config: "/w/blaise.star", AgentName: "a", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}
	if err := s.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func roundTrip(t *testing.T, s Store) {
	now := time.Now().UTC().Truncate(time.Second)
	rec := &lifecycle.Record{
		ID: s.NewSessionID(), Config: "/w/blaise.star", Dir: "/w", AgentName: "claude", State: lifecycle.Paused,
		Created: now, Updated: now, Runs: 2, Settings: lifecycle.DefaultSettings(), Resumable: true,
		ACPSessionID: "acp-1",
		Stop:         &lifecycle.StopRecord{Stop: lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}, At: now, Run: 2, Delivered: true},
		Pause:        &lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: now, Run: 2},
		PausedAt:     now, ExpiresAt: now.Add(24 * time.Hour),
		Teardown:      lifecycle.TeardownRecord{Attempts: 1, LastError: "boom", NextAt: now},
		OrphanedState: []string{"old"},
		PID:           42,
		Runner:        "r1",
		RunnerID:      "r1credid",
	}
	if err := s.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, rec)
	}
	testsupport.WantErr(t, s.CreateSession(t.Context(), &lifecycle.Record{ID: rec.ID}), "session "+rec.ID+" already exists")
	if got, _ := s.Session(t.Context(), rec.ID); !reflect.DeepEqual(got, rec) {
		t.Errorf("a refused duplicate changed the record: %+v", got)
	}

	// Created and Updated default to now.
	before := time.Now().UTC().Add(-time.Second)
	fresh := Create(t, s, "fresh")
	if fresh.Created.Before(before) || !fresh.Updated.Equal(fresh.Created) {
		t.Errorf("defaults: created %v, updated %v", fresh.Created, fresh.Updated)
	}
}

func unknownSession(t *testing.T, s Store) {
	ctx := t.Context()
	_, err := s.Session(ctx, "nope")
	checks := map[string]error{"Session": err}
	_, checks["UpdateSession"] = s.UpdateSession(ctx, "nope", func(*lifecycle.Record) error { return nil })
	checks["Persisted.Set"] = s.Persisted().Set(ctx, "nope", "wt", "blaise:worktree", []byte("1"))
	checks["Loaded"] = s.Loaded(ctx, "nope", lifecycle.Loaded{})
	_, checks["Paused"] = s.Paused(ctx, "nope", lifecycle.PauseRecord{Reason: lifecycle.Idle})
	_, checks["TornDown"] = s.TornDown(ctx, "nope", nil, time.Now())
	_, checks["Transcript"] = s.Transcript(ctx, "nope")
	for name, err := range checks {
		if !errors.Is(err, lifecycle.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s of an unknown session = %v, want session.ErrNotFound naming it", name, err)
		}
	}
	// Reading state of an unknown session finds none, as for a known one.
	if _, ok, err := s.Persisted().Get(ctx, "nope", "wt"); ok || err != nil {
		t.Errorf("Persisted.Get = %v, %v", ok, err)
	}
	if ids, err := s.PersistedIDs(ctx, "nope"); len(ids) != 0 || err != nil {
		t.Errorf("PersistedIDs = %v, %v", ids, err)
	}
	if err := s.DeletePersisted(ctx, "nope"); err != nil {
		t.Errorf("DeletePersisted = %v", err)
	}
}

func invalidIDs(t *testing.T, s Store) {
	Create(t, s, "ok")
	p := s.Persisted()
	ctx := t.Context()
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "a b", strings.Repeat("a", 129)} {
		testsupport.WantErr(t, s.CreateSession(ctx, &lifecycle.Record{ID: id}), "invalid session id")
		_, err := s.Session(ctx, id)
		testsupport.WantErr(t, err, "invalid session id")
		_, err = s.UpdateSession(ctx, id, func(*lifecycle.Record) error { return nil })
		testsupport.WantErr(t, err, "invalid session id")
		testsupport.WantErr(t, s.DeletePersisted(ctx, id), "invalid session id")
		testsupport.WantErr(t, s.Discard(ctx, id), "invalid session id")
		_, err = s.Transcript(ctx, id)
		testsupport.WantErr(t, err, "invalid session id")
		testsupport.WantErr(t, p.Set(ctx, "ok", id, "x", []byte("1")), "invalid plug id")
		_, _, err = p.Get(ctx, "ok", id)
		testsupport.WantErr(t, err, "invalid plug id")
		testsupport.WantErr(t, p.Delete(ctx, "ok", id), "invalid plug id")
		_, _, err = s.PersistedPlug(ctx, "ok", id)
		testsupport.WantErr(t, err, "invalid plug id")
	}
}

func updateIsAtomic(t *testing.T, s Store) {
	rec := Create(t, s, "s")
	got, err := s.UpdateSession(t.Context(), "s", func(r *lifecycle.Record) error { r.State = lifecycle.Paused; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.Paused || got.Updated.Before(rec.Updated) {
		t.Errorf("after update: state %s, updated %v (was %v)", got.State, got.Updated, rec.Updated)
	}
	boom := errors.New("boom")
	_, err = s.UpdateSession(t.Context(), "s", func(r *lifecycle.Record) error { r.State = lifecycle.Ended; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateSession = %v, want boom", err)
	}
	if r, _ := s.Session(t.Context(), "s"); r.State != lifecycle.Paused || !r.Updated.Equal(got.Updated) {
		t.Errorf("an aborted update wrote: state %s", r.State)
	}
	_, err = s.UpdateSession(t.Context(), "s", func(r *lifecycle.Record) error { r.ID = "t"; return nil })
	testsupport.WantErr(t, err, "may not change the id")
	if _, err := s.Session(t.Context(), "t"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a refused id change made session t: %v", err)
	}
}

func concurrentUpdates(t *testing.T, s Store) {
	Create(t, s, "counted")
	Increments(t, "counted", 20, s, s, s, s, s, s, s, s)
}

// Increments has one goroutine per store in stores increment the Runs of
// session id each times at once, and fails t unless every increment
// counted: updates are atomic, and none fails for contention.
func Increments(t testing.TB, id string, each int, stores ...lifecycle.Sessions) {
	t.Helper()
	before, err := stores[0].Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for range each {
				if _, err := s.UpdateSession(t.Context(), id, func(r *lifecycle.Record) error { r.Runs++; return nil }); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rec, err := stores[0].Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Runs + len(stores)*each; rec.Runs != want {
		t.Errorf("Runs = %d, want %d: updates were lost", rec.Runs, want)
	}
}

func listing(t *testing.T, s Store) {
	if recs, err := s.Sessions(t.Context()); len(recs) != 0 || err != nil {
		t.Fatalf("an empty store lists %v, %v", recs, err)
	}
	now := time.Now().UTC()
	// Byte order, whatever the database's collation: "B" before "a".
	for _, id := range []string{"c", "b", "a", "B"} {
		if err := s.CreateSession(t.Context(), &lifecycle.Record{ID: id, State: lifecycle.Active, Created: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(t.Context(), &lifecycle.Record{ID: "z", State: lifecycle.Active, Created: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// An update that moves Created moves the session in the list.
	if _, err := s.UpdateSession(t.Context(), "b", func(r *lifecycle.Record) error { r.Created = now.Add(time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if want := []string{"z", "B", "a", "c", "b"}; !slices.Equal(ids, want) {
		t.Errorf("Sessions() = %v, want %v", ids, want)
	}
}

// dueSessions: the sweep is told of the active sessions and those at rest
// whose expiry or teardown retry is due, and when the next of the others
// is due, whatever the store (L2, L6); an update moves a session in or out.
func dueSessions(t *testing.T, s Store) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	later, latest := now.Add(time.Hour), now.Add(2*time.Hour)
	recs := []*lifecycle.Record{
		{ID: "active", State: lifecycle.Active},
		{ID: "expired", State: lifecycle.Paused, ExpiresAt: now},
		{ID: "expires-later", State: lifecycle.Paused, ExpiresAt: latest},
		{ID: "retry-due", State: lifecycle.TearingDown, Teardown: lifecycle.TeardownRecord{NextAt: now.Add(-time.Minute)}},
		{ID: "retry-later", State: lifecycle.TearingDown, Teardown: lifecycle.TeardownRecord{NextAt: later}},
		{ID: "teardown-now", State: lifecycle.TearingDown},
		{ID: "ended", State: lifecycle.Ended},
		{ID: "orphaned", State: lifecycle.Orphaned},
	}
	for _, r := range recs {
		r.Created = now
		if err := s.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	check := func(wantIDs []string, wantNext time.Time) {
		t.Helper()
		ids, next, err := s.DueSessions(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		if slices.Sort(wantIDs); !slices.Equal(ids, wantIDs) {
			t.Errorf("DueSessions ids = %v, want %v", ids, wantIDs)
		}
		if !next.Equal(wantNext) {
			t.Errorf("DueSessions next = %v, want %v", next, wantNext)
		}
	}
	check([]string{"active", "expired", "retry-due", "teardown-now"}, later)
	// The retry that was later is due now; the active session paused.
	if _, err := s.UpdateSession(ctx, "retry-later", func(r *lifecycle.Record) error { r.Teardown.NextAt = now; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSession(ctx, "active", func(r *lifecycle.Record) error {
		r.State, r.ExpiresAt = lifecycle.Paused, now.Add(3*time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check([]string{"expired", "retry-due", "retry-later", "teardown-now"}, latest)
}

func persistedState(t *testing.T, s Store) {
	p := s.Persisted()
	ctx := t.Context()
	Create(t, s, "s1")
	Create(t, s, "s2")
	if _, ok, err := p.Get(ctx, "s1", "wt"); ok || err != nil {
		t.Fatalf("Get before Set: ok %v, err %v", ok, err)
	}
	// Get returns the bytes Set was given, spacing and all.
	value := []byte(`{ "branch": "secret-branch-name", "n": [1, 2] }`)
	if err := p.Set(ctx, "s1", "wt", "blaise:worktree", value); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(ctx, "s1", "a.b-c_d", "other", []byte(`"x"`)); err != nil {
		t.Fatal(err)
	}
	testsupport.WantErr(t, p.Set(ctx, "s1", "bad", "x", []byte(`{`)), "not JSON")
	if got, ok, err := p.Get(ctx, "s1", "wt"); err != nil || !ok || !bytes.Equal(got, value) {
		t.Fatalf("Get = %s, %v, %v; want %s", got, ok, err, value)
	}
	if _, ok, _ := p.Get(ctx, "s2", "wt"); ok {
		t.Error("state of s1 visible in s2")
	}
	if name, ok, err := s.PersistedPlug(ctx, "s1", "wt"); name != "blaise:worktree" || !ok || err != nil {
		t.Errorf("PersistedPlug = %q, %v, %v", name, ok, err)
	}
	if _, ok, err := s.PersistedPlug(ctx, "s1", "none"); ok || err != nil {
		t.Errorf("PersistedPlug of no state = %v, %v", ok, err)
	}
	if ids, err := s.PersistedIDs(ctx, "s1"); err != nil || !slices.Equal(ids, []string{"a.b-c_d", "wt"}) {
		t.Errorf("PersistedIDs = %v, %v", ids, err)
	}
	// Set again replaces, plug name included.
	if err := p.Set(ctx, "s1", "wt", "blaise:worktree2", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := p.Get(ctx, "s1", "wt"); string(got) != "2" {
		t.Errorf("after a second Set: %s", got)
	}
	if name, _, _ := s.PersistedPlug(ctx, "s1", "wt"); name != "blaise:worktree2" {
		t.Errorf("after a second Set, the plug is %q", name)
	}

	if err := p.Delete(ctx, "s1", "a.b-c_d"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, "s1", "a.b-c_d"); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if _, ok, _ := p.Get(ctx, "s1", "a.b-c_d"); ok {
		t.Error("deleted state is still there")
	}
	if err := p.Set(ctx, "s2", "wt", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePersisted(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.PersistedIDs(ctx, "s1"); len(ids) != 0 || err != nil {
		t.Errorf("after DeletePersisted: %v, %v", ids, err)
	}
	if _, ok, _ := p.Get(ctx, "s2", "wt"); !ok {
		t.Error("DeletePersisted of s1 took the state of s2")
	}
	if _, err := s.Session(ctx, "s1"); err != nil {
		t.Errorf("DeletePersisted took the session: %v", err)
	}
}

// HoldUpdate starts an UpdateSession of session id that waits inside its
// f, and returns once it does; release lets it finish and waits for it.
// Meanwhile the store is busy writing that session: its lock (the file
// store), its one writing connection (SQLite) or its row (PostgreSQL) is
// held.
func HoldUpdate(t testing.TB, s lifecycle.Sessions, id string) (release func()) {
	t.Helper()
	held, released := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	// Ends as the returned func releases the update, and waits for it (done).
	go func() {
		_, err := s.UpdateSession(t.Context(), id, func(*lifecycle.Record) error {
			close(held)
			<-released
			return nil
		})
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("holding an update of session %s: %v", id, err)
	}
	return func() {
		t.Helper()
		close(released)
		if err := <-done; err != nil {
			t.Fatalf("the held update of session %s: %v", id, err)
		}
	}
}

// setHonoursContext: a Set that waits for a write in progress gives up
// when its context ends, and writes nothing, then or later.
func setHonoursContext(t *testing.T, s Store) {
	Create(t, s, "s")
	release := HoldUpdate(t, s, "s")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.Persisted().Set(ctx, "s", "wt", "x", []byte(`"abandoned"`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Set while a write holds the session = %v, want a deadline error", err)
	}
	release()
	// On PostgreSQL the abandoned statement may still be waiting for the
	// row, and run once it is free: it must not commit.
	if _, err := s.UpdateSession(t.Context(), "s", func(*lifecycle.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Persisted().Get(t.Context(), "s", "wt"); ok {
		t.Errorf("a Set that gave up wrote %s", v)
	}
	if err := s.Persisted().Set(t.Context(), "s", "wt", "x", []byte(`"kept"`)); err != nil {
		t.Fatal(err)
	}
}

func reports(t *testing.T, s Store) {
	Create(t, s, "s")
	settings := lifecycle.DefaultSettings()
	settings.PausedLifetime = time.Hour
	if err := s.Loaded(t.Context(), "s", lifecycle.Loaded{Resumable: true, Settings: settings, OrphanedState: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	rec, err := s.Paused(t.Context(), "s", lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: at, Run: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.Paused || !rec.ExpiresAt.Equal(at.Add(time.Hour)) || !rec.Resumable || !slices.Equal(rec.OrphanedState, []string{"gone"}) {
		t.Errorf("after Loaded and Paused: %+v", rec)
	}
	if got, _ := s.Session(t.Context(), "s"); !reflect.DeepEqual(got, rec) {
		t.Errorf("Paused returned %+v, stored %+v", rec, got)
	}
	rec, err = s.Paused(t.Context(), "s", lifecycle.PauseRecord{Reason: lifecycle.Closed, At: at, Run: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.TearingDown || rec.EndReason != lifecycle.Closed {
		t.Errorf("after a pause that ends it: state %s, end reason %s", rec.State, rec.EndReason)
	}
}

func tornDown(t *testing.T, s Store) {
	ctx := t.Context()
	Create(t, s, "s")
	if _, err := s.Paused(ctx, "s", lifecycle.PauseRecord{Reason: lifecycle.Closed, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Persisted().Set(ctx, "s", "wt", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	rec, err := s.TornDown(ctx, "s", errors.New("rm failed"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.TearingDown || rec.Teardown.Attempts != 1 {
		t.Errorf("after a failed teardown: %+v", rec)
	}
	if _, ok, _ := s.Persisted().Get(ctx, "s", "wt"); !ok {
		t.Error("a failed teardown deleted the persisted state: the retry needs it")
	}
	if rec, err = s.TornDown(ctx, "s", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rec.State != lifecycle.Ended {
		t.Errorf("after a teardown: state %s", rec.State)
	}
	if ids, err := s.PersistedIDs(ctx, "s"); len(ids) != 0 || err != nil {
		t.Errorf("an ended session keeps persisted state %v (%v) (L2)", ids, err)
	}
}

func discard(t *testing.T, s Store) {
	ctx := t.Context()
	Create(t, s, "s")
	Create(t, s, "other")
	if err := s.Persisted().Set(ctx, "s", "wt", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	w, err := s.Transcript(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "{}\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "s"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a discarded session is still there: %v", err)
	}
	if ids, _ := s.PersistedIDs(ctx, "s"); len(ids) != 0 {
		t.Errorf("a discarded session keeps persisted state %v", ids)
	}
	if _, err := s.Session(ctx, "other"); err != nil {
		t.Errorf("Discard took another session: %v", err)
	}
	// The id is free again, with nothing of the old session.
	Create(t, s, "s")
	if _, ok, _ := s.Persisted().Get(ctx, "s", "wt"); ok {
		t.Error("a new session with a discarded one's id has its persisted state")
	}
	w, err = s.Transcript(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "{\"new\":1}\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ReadTranscript(t, s, "s"); got != "{\"new\":1}\n" {
		t.Errorf("a new session with a discarded one's id has the transcript %q", got)
	}
}

// ReadTranscript returns the whole transcript of a session in s.
func ReadTranscript(t *testing.T, s interface {
	ReadTranscript(context.Context, string) (io.ReadCloser, error)
}, id string) string {
	t.Helper()
	r, err := s.ReadTranscript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func transcript(t *testing.T, s Store) {
	Create(t, s, "s")
	Create(t, s, "other")
	w, err := s.Transcript(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "{\"other\":1}\n")
	w.Close()
	w, err = s.Transcript(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	// Lines written in pieces, and several in one write.
	for _, piece := range []string{`{"a":`, "1}\n", "{\"b\":2}\n{\"c\":3}\n", `{"d"`, ":4}\n"} {
		if n, err := io.WriteString(w, piece); n != len(piece) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", piece, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A second writer appends.
	w, err = s.Transcript(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "{\"e\":5}\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n{\"e\":5}\n"
	if got := ReadTranscript(t, s, "s"); got != want {
		t.Errorf("transcript:\n got %q\nwant %q", got, want)
	}
	if got := ReadTranscript(t, s, "other"); got != "{\"other\":1}\n" {
		t.Errorf("another session's transcript: %q", got)
	}
}

// transcriptCalls: a store whose transcripts keep the numbers of the calls
// that appended their lines (session.CallTranscripts) tells, per run, the
// last call whose lines it holds, across writers; a line not ended is
// not held until it is. A store of one machine, whose runs send no call
// again, need not keep them.
func transcriptCalls(t *testing.T, s Store) {
	calls, ok := s.(lifecycle.CallTranscripts)
	if !ok {
		t.Skip("this store's transcripts keep no call numbers (its runs send no call again)")
	}
	Create(t, s, "s")
	Create(t, s, "other")
	last := func(id string, run int) uint64 {
		t.Helper()
		n, err := calls.TranscriptCall(t.Context(), id, run)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := last("s", 1); n != 0 {
		t.Fatalf("an empty transcript's last call of run 1: %d, want 0", n)
	}
	open := func(id string) lifecycle.CallTranscript {
		t.Helper()
		w, err := s.Transcript(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		ct, ok := w.(lifecycle.CallTranscript)
		if !ok {
			t.Fatalf("the transcript of a session.CallTranscripts store is a %T, not a session.CallTranscript", w)
		}
		return ct
	}
	w := open("s")
	w.Call(1, 3)
	io.WriteString(w, "{\"a\":1}\n")
	w.Call(1, 4)
	io.WriteString(w, `{"b":`) // not ended: not held yet
	if n := last("s", 1); n != 3 {
		t.Fatalf("after call 4 left a line not ended, the last call of run 1 is %d, want 3", n)
	}
	w.Call(1, 5)
	io.WriteString(w, "2}\n")
	if n := last("s", 1); n != 5 {
		t.Fatalf("the last call of run 1: %d, want 5", n)
	}
	w.Close()
	// Another run numbers its calls from 1; another session has its own.
	w = open("s")
	w.Call(2, 1)
	io.WriteString(w, "{\"d\":4}\n")
	w.Close()
	w = open("other")
	w.Call(1, 7)
	io.WriteString(w, "{\"o\":1}\n")
	w.Close()
	if n := last("s", 2); n != 1 {
		t.Errorf("the last call of run 2: %d, want 1", n)
	}
	if n := last("s", 1); n < 5 {
		t.Errorf("run 2 changed the last call of run 1: %d", n)
	}
	if n := last("other", 1); n != 7 {
		t.Errorf("another session's last call of run 1: %d, want 7", n)
	}
	if n := last("s", 3); n != 0 {
		t.Errorf("a run that appended nothing: last call %d, want 0", n)
	}
}

func newSessionID(t *testing.T, s Store) {
	seen := map[string]bool{}
	for range 100 {
		id := s.NewSessionID()
		if lifecycle.CheckID("session id", id) != nil || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}
