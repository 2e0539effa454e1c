package storetest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// What a run records of itself besides its reports of state: the
// session's title and its plugs' log.

func titled(t *testing.T, s Store) {
	Create(t, s, "s")
	for range 2 { // the same report again changes nothing
		if err := s.Titled(t.Context(), "s", "fix the flaky test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Paused(t.Context(), "s", lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: time.Now(), Run: 1}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Session(t.Context(), "s"); err != nil {
		t.Fatal(err)
	} else if rec.Title != "fix the flaky test" {
		t.Fatalf("title %q after a pause", rec.Title)
	}
	if err := s.Titled(t.Context(), "unknown", "x"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("titling an unknown session: %v", err)
	}
}

func titleSet(t *testing.T, s Store) {
	ctx := t.Context()
	Create(t, s, "s")
	if err := s.Titled(ctx, "s", "derived"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "  ", "two\nlines", "a\ttab", strings.Repeat("x", lifecycle.MaxTitle+1)} {
		if _, err := lifecycle.SetTitle(ctx, s, "s", bad); err == nil {
			t.Errorf("the title %q was taken", bad)
		}
	}
	rec, err := lifecycle.SetTitle(ctx, s, "s", " the person's title ")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Title != "the person's title" || !rec.TitleSet {
		t.Fatalf("set: title %q, set %v", rec.Title, rec.TitleSet)
	}
	if err := s.Titled(ctx, "s", "derived later"); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Session(ctx, "s"); err != nil {
		t.Fatal(err)
	} else if rec.Title != "the person's title" {
		t.Fatalf("a derived title replaced the person's: %q", rec.Title)
	}
	if _, err := lifecycle.SetTitle(ctx, s, "unknown", "x"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("titling an unknown session: %v", err)
	}
}

func plugLog(t *testing.T, s Store) {
	ctx := t.Context()
	logs, ok := s.(lifecycle.PlugLogs)
	if !ok {
		t.Skip("the store keeps no plug log")
	}
	Create(t, s, "s")
	if got, err := logs.PlugLog(ctx, "s"); err != nil || len(got) != 0 {
		t.Fatalf("a session whose plugs logged nothing: %v %v", got, err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	run1 := []lifecycle.PlugLogLine{
		{Run: 1, Seq: 1, Time: at, Level: "info", Plug: "acme/x", Msg: "started", Attrs: []string{"port", "8080"}},
		{Run: 1, Seq: 2, Time: at, Level: "warn", Plug: "acme/x", Msg: "slow"},
	}
	run2 := []lifecycle.PlugLogLine{{Run: 2, Seq: 1, Time: at, Level: "info", Plug: "acme/y", Msg: "again"}, {Run: 2, Seq: 2, Dropped: 7}}
	for _, lines := range [][]lifecycle.PlugLogLine{run1[:1], run1[1:], run2} {
		if err := logs.AppendPlugLog(ctx, "s", lines); err != nil {
			t.Fatal(err)
		}
	}
	got, err := logs.PlugLog(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(run1), run2...); !reflect.DeepEqual(got, want) {
		t.Errorf("plug log\n got %+v\nwant %+v", got, want)
	}
	if err := logs.AppendPlugLog(ctx, "unknown", run1); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a plug log of an unknown session: %v", err)
	}
	if err := s.Discard(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	Create(t, s, "s")
	if got, err := logs.PlugLog(ctx, "s"); err != nil || len(got) != 0 {
		t.Errorf("a new session with a discarded one's id has its plug log: %v %v", got, err)
	}
}
