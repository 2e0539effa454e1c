package lifecycle

import (
	"context"
	"testing"
	"time"
)

// oneRecord is a store of one record that counts its writes.
type oneRecord struct {
	store  // what the test does not call
	rec    Record
	writes int
}

type store = Sessions

func (s *oneRecord) UpdateSession(_ context.Context, _ string, f func(*Record) error) (*Record, error) {
	rec := s.rec
	if err := ApplyUpdate(&rec, f, time.Now()); err != nil {
		return nil, err
	}
	s.rec, s.writes = rec, s.writes+1
	return &rec, nil
}

// A resume's first report is most often what the record holds: it is
// recorded (L7) without a write, and one that differs is written.
func TestL7_ALoadedReportTheRecordHoldsWritesNothing(t *testing.T) {
	s := &oneRecord{rec: Record{ID: "s", Resumable: true, Settings: DefaultSettings(), OrphanedState: []string{"p"}}}
	same := Loaded{Resumable: true, Settings: DefaultSettings(), OrphanedState: []string{"p"}}
	if err := RecordLoaded(t.Context(), s, "s", same); err != nil || s.writes != 0 {
		t.Fatalf("the same report: err %v, %d writes", err, s.writes)
	}
	other := same
	other.Resumable = false
	if err := RecordLoaded(t.Context(), s, "s", other); err != nil || s.writes != 1 || s.rec.Resumable {
		t.Fatalf("another report: err %v, %d writes, resumable %v", err, s.writes, s.rec.Resumable)
	}
}
