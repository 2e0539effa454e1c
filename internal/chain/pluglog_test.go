package chain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// storePlugLog runs l until log has logged its lines, and returns what
// it stored and the failures it was told of.
func storePlugLog(t *testing.T, l *PlugLog, store func([]lifecycle.PlugLogLine) error, logLines func()) (stored []lifecycle.PlugLogLine, failures []error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, func(lines []lifecycle.PlugLogLine) error {
			if err := store(lines); err != nil {
				return err
			}
			stored = append(stored, lines...)
			return nil
		}, func(err error) { failures = append(failures, err) })
	}()
	logLines()
	cancel()
	<-done
	return stored, failures
}

func keep([]lifecycle.PlugLogLine) error { return nil }

func TestPlugLogIsCappedWithADroppedCount(t *testing.T) {
	l := NewPlugLog(2, same)
	stored, _ := storePlugLog(t, l, keep, func() {
		for range lifecycle.MaxPlugLogLines + 3 {
			l.Line("acme/x", log.InfoLevel, "again", nil)
		}
	})
	if len(stored) != lifecycle.MaxPlugLogLines+1 {
		t.Fatalf("%d lines stored", len(stored))
	}
	for i, line := range stored[:lifecycle.MaxPlugLogLines] {
		if line.Seq != i+1 || line.Run != 2 || line.Msg != "again" {
			t.Fatalf("line %d: %+v", i, line)
		}
	}
	if last := stored[len(stored)-1]; last.Dropped != 3 || last.Seq != lifecycle.MaxPlugLogLines+1 {
		t.Fatalf("last line %+v, want 3 dropped", last)
	}
}

func TestPlugLogIsCappedInBytes(t *testing.T) {
	l := NewPlugLog(1, same)
	big := strings.Repeat("x", lifecycle.MaxPlugLogBytes/4)
	stored, _ := storePlugLog(t, l, keep, func() {
		for range 5 {
			l.Line("acme/x", log.InfoLevel, big, nil)
		}
	})
	if len(stored) != 4 || stored[3].Dropped != 2 {
		t.Fatalf("%d lines stored, the last %+v; want 3 kept and 2 dropped", len(stored), stored[len(stored)-1])
	}
}

func TestPlugLogStopsAtAStoreThatCannotKeepIt(t *testing.T) {
	l := NewPlugLog(1, same)
	old := func([]lifecycle.PlugLogLine) error { return errors.New(`store: unknown operation "plug_log"`) }
	stored, failures := storePlugLog(t, l, old, func() {
		for range 3 {
			l.Line("acme/x", log.InfoLevel, "again", []any{"k", 1})
		}
	})
	if len(stored) != 0 || len(failures) != 1 {
		t.Fatalf("stored %d lines, told of %v; want the one failure", len(stored), failures)
	}
}
