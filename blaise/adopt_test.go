package blaise_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/session"
)

// TestIssue13_ARunInProgressIsLeftForItsRunnerUntilAdoptUntil: a session
// whose run began before the engine did (a server that restarted) is left
// active while its runner may still hand the run back: no sweep settles
// it, and a resume or an end of it is refused as active. Once AdoptUntil
// has passed, the sweep settles it as a failed run.
func TestIssue13_ARunInProgressIsLeftForItsRunnerUntilAdoptUntil(t *testing.T) {
	store, err := blaise.OpenStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	clock := session.NewFakeClock(time.Now())
	store.Clock = clock
	now := clock.Now()
	rec := &session.Record{ID: store.NewSessionID(), Config: "/blaise.star", State: session.Active, Created: now, Updated: now, Settings: session.DefaultSettings(), Resumable: true}
	session.BeginRun(rec, session.StartRun, now)
	if err := store.CreateSession(rec); err != nil {
		t.Fatal(err)
	}
	e := &blaise.Engine{Store: store, Clock: clock, AdoptUntil: now.Add(time.Minute)}
	if err := e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(rec.ID); err == nil || !strings.Contains(err.Error(), "may still hand it back") {
		t.Fatalf("resume while the run may be handed back: %v", err)
	}
	if _, err := e.End(context.Background(), rec.ID); err == nil || !strings.Contains(err.Error(), "may still hand it back") {
		t.Fatalf("end while the run may be handed back: %v", err)
	}
	if err := e.Adoptable(rec.ID, 1); err != nil {
		t.Fatalf("adoptable: %v", err)
	}
	if got, _ := store.Session(rec.ID); got.State != session.Active || !got.Updated.Equal(now) {
		t.Fatalf("before AdoptUntil: %+v", got)
	}
	clock.Advance(time.Minute)
	if err := e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Session(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != session.Paused || got.Pause == nil || got.Pause.Reason != session.Failed {
		t.Fatalf("after AdoptUntil: %+v", got)
	}
	if err := e.Adoptable(rec.ID, 1); err == nil || !strings.Contains(err.Error(), "is paused") {
		t.Fatalf("adoptable once settled: %v", err)
	}
}
