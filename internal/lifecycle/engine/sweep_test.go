package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// dueOnly is a store that fails every read of a record but through
// DueSessions: what a sweep reads besides, it reads of the records due.
type dueOnly struct{ lifecycle.Store }

func (dueOnly) Sessions(context.Context) ([]*lifecycle.Record, error) {
	return nil, errors.New("every record was read")
}

func (dueOnly) Session(_ context.Context, id string) (*lifecycle.Record, error) {
	return nil, fmt.Errorf("the record of session %s, not due, was read", id)
}

// A sweep reads what its store finds due (DueSessions) and no other
// record: sessions at rest that are not due cost it nothing (L2, L6), as
// the SQL store finds them through its indexes.
func TestSweepReadsOnlyTheRecordsTheStoreFindsDue(t *testing.T) {
	store, err := filestore.OpenStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, r := range []*lifecycle.Record{
		{ID: "ended", State: lifecycle.Ended, Created: now},
		{ID: "paused", State: lifecycle.Paused, Created: now, PausedAt: now, ExpiresAt: now.Add(time.Hour)},
	} {
		if err := store.CreateSession(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	e := &engine.Engine{Store: dueOnly{store}}
	if err := e.Sweep(t.Context()); err != nil {
		t.Errorf("Sweep read a record that is not due: %v", err)
	}
}
