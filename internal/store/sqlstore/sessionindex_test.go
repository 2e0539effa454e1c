package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// What is due is found through the due and state indexes, without reading
// the records at rest that are not due: one that no longer decodes costs a
// sweep nothing (L2, L6; the engine's sweep reads only what DueSessions
// names, TestSweepReadsOnlyTheRecordsTheStoreFindsDue).
func TestDueSessionsReadNoRecordThatIsNotDue(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, newKey())
		now := time.Now().UTC()
		for _, r := range []*lifecycle.Record{
			{ID: "ended", State: lifecycle.Ended, Created: now},
			{ID: "paused", State: lifecycle.Paused, Created: now, PausedAt: now, ExpiresAt: now.Add(time.Hour)},
		} {
			if err := s.CreateSession(ctx, r); err != nil {
				t.Fatal(err)
			}
			if _, err := s.writer().exec(ctx, "UPDATE sessions SET record = ? WHERE id = ?", `{"id": "`+r.ID+`", "runs": `, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		ids, next, err := s.DueSessions(ctx, now)
		if len(ids) != 0 || !next.Equal(now.Add(time.Hour).Truncate(time.Nanosecond)) || err != nil {
			t.Errorf("DueSessions = %v, %v, %v; want none, the paused session's expiry", ids, next, err)
		}
	})
}

// Rows written before the store kept the due, owner, runner and title
// columns (due NULL) get them from their records when a store opens them.
func TestRowsWrittenBeforeTheIndexAreIndexedAtOpen(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key := newKey()
		s := open(t, dsn, key)
		now := time.Now().UTC()
		rec := &lifecycle.Record{ID: "old", AgentName: "a", Owner: "ann", Runner: "r1", Title: "fix the build", State: lifecycle.Paused, Created: now, ExpiresAt: now.Add(-time.Minute)}
		if err := s.CreateSession(ctx, rec); err != nil {
			t.Fatal(err)
		}
		corrupt := &lifecycle.Record{ID: "corrupt", State: lifecycle.Ended, Created: now}
		if err := s.CreateSession(ctx, corrupt); err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer().exec(ctx, "UPDATE sessions SET due = NULL, owner = '', runner = '', title = ''"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer().exec(ctx, "UPDATE sessions SET record = '{' WHERE id = 'corrupt'"); err != nil {
			t.Fatal(err)
		}
		s.Close()

		s = open(t, dsn, key)
		ids, _, err := s.DueSessions(ctx, now)
		if err != nil || !slices.Equal(ids, []string{"old"}) {
			t.Errorf("DueSessions = %v, %v; want the expired session written before", ids, err)
		}
		ann := "ann"
		page, err := s.ListSessions(ctx, ListQuery{Owner: &ann, Runner: "r1", Text: "BUILD", Limit: 10})
		if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != "old" {
			t.Errorf("ListSessions = %+v, %v; want the session written before", page, err)
		}
		var nulls int
		if err := s.read.row(ctx, "SELECT COUNT(*) FROM sessions WHERE due IS NULL").Scan(&nulls); err != nil || nulls != 0 {
			t.Errorf("%d rows left unindexed (%v)", nulls, err)
		}
	})
}

// The sessions list comes in pages, newest first (or oldest first), each
// after the cursor of the one before, with the filters applied in the database; the last page
// has no cursor, and a cursor the store did not give is refused.
func TestListSessionsPagesNewestFirstWithFilters(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, newKey())
		base := time.Now().UTC()
		var newestFirst, oldestFirst, paused []string
		for i := range 25 {
			rec := &lifecycle.Record{ID: fmt.Sprintf("s%02d", i), AgentName: []string{"a", "b"}[i%2], State: lifecycle.Active,
				Runner: []string{"r1", "r2", "r3"}[i%3], Title: fmt.Sprintf("Task %d: %d%% done_", i, i),
				Created: base.Add(time.Duration(i/2) * time.Second)} // two at a time: ties broken by id
			if i%5 == 0 {
				rec.State = lifecycle.Paused
				paused = append([]string{rec.ID}, paused...)
			}
			if err := s.CreateSession(ctx, rec); err != nil {
				t.Fatal(err)
			}
			newestFirst = append([]string{rec.ID}, newestFirst...)
			oldestFirst = append(oldestFirst, rec.ID)
		}
		all := func(q ListQuery) (ids []string, pages int) {
			t.Helper()
			for {
				page, err := s.ListSessions(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(page.Sessions) > q.Limit {
					t.Fatalf("a page of %d sessions, limit %d", len(page.Sessions), q.Limit)
				}
				for _, r := range page.Sessions {
					ids = append(ids, r.ID)
				}
				if page.Next == "" {
					return ids, pages
				}
				q.After = page.Next
			}
		}
		if ids, pages := all(ListQuery{Limit: 10}); !slices.Equal(ids, newestFirst) || pages != 3 {
			t.Errorf("pages of 10: %d pages of %v, want 3 of %v", pages, ids, newestFirst)
		}
		if ids, pages := all(ListQuery{Limit: 10, Oldest: true}); !slices.Equal(ids, oldestFirst) || pages != 3 {
			t.Errorf("pages of 10, oldest first: %d pages of %v", pages, ids)
		}
		if ids, pages := all(ListQuery{Limit: 25}); len(ids) != 25 || pages != 1 {
			t.Errorf("a page of 25 of 25 sessions: %d pages, %d sessions; want 1 page without a cursor", pages, len(ids))
		}
		if ids, _ := all(ListQuery{State: string(lifecycle.Paused), Limit: 2}); !slices.Equal(ids, paused) {
			t.Errorf("state paused: %v, want %v", ids, paused)
		}
		ids, _ := all(ListQuery{Agent: "b", Runner: "r2", Limit: 100})
		if !slices.Equal(ids, []string{"s19", "s13", "s07", "s01"}) {
			t.Errorf("agent b on runner r2: %v", ids)
		}
		// The title filter takes its text as it is: % and _ are no wildcards.
		if ids, _ := all(ListQuery{Text: "task 1", Limit: 100}); len(ids) != 11 {
			t.Errorf("title holding %q: %v, want the 11 of tasks 1 and 10 to 19", "task 1", ids)
		}
		if ids, _ := all(ListQuery{Text: "0% done_", Limit: 100}); !slices.Equal(ids, []string{"s20", "s10", "s00"}) {
			t.Errorf("title holding %q: %v", "0% done_", ids)
		}
		if ids, _ := all(ListQuery{Text: "0_ done", Limit: 100}); len(ids) != 0 {
			t.Errorf("title holding %q: %v, want none", "0_ done", ids)
		}
		// An id is found by its start too.
		if ids, _ := all(ListQuery{Text: "s07", Limit: 100}); !slices.Equal(ids, []string{"s07"}) {
			t.Errorf("id starting with %q: %v", "s07", ids)
		}
		_, err := s.ListSessions(ctx, ListQuery{Limit: 10, After: "yesterday"})
		if !errors.Is(err, ErrCursor) {
			t.Errorf("a cursor of no list: %v, want ErrCursor", err)
		}
		testsupport.WantErr(t, err, `cursor "yesterday"`)
	})
}

// TestTitledFillsTheTitleColumn: a title a run reports is what a list's
// text filter finds; an old record without one is found by none.
func TestTitledFillsTheTitleColumn(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, newKey())
		now := time.Now().UTC()
		for _, id := range []string{"old", "new"} {
			if err := s.CreateSession(ctx, &lifecycle.Record{ID: id, State: lifecycle.Active, Created: now}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Titled(ctx, "new", "Fix the flaky test"); err != nil {
			t.Fatal(err)
		}
		page, err := s.ListSessions(ctx, ListQuery{Text: "flaky", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Sessions) != 1 || page.Sessions[0].ID != "new" || page.Sessions[0].Title != "Fix the flaky test" {
			t.Fatalf("listed %+v", page.Sessions)
		}
	})
}

// TestPlugLogResentLinesAreStoredOnce: lines a runner sends again after
// it reconnected are kept once, and a line past a run's cap is refused.
func TestPlugLogResentLinesAreStoredOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, newKey())
		if err := s.CreateSession(ctx, &lifecycle.Record{ID: "s", State: lifecycle.Active, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		lines := []lifecycle.PlugLogLine{{Run: 1, Seq: 1, Msg: "one"}, {Run: 1, Seq: 2, Msg: "two"}}
		for _, batch := range [][]lifecycle.PlugLogLine{lines[:1], lines} {
			if err := s.AppendPlugLog(ctx, "s", batch); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.PlugLog(ctx, "s"); err != nil || len(got) != 2 || got[1].Msg != "two" {
			t.Fatalf("plug log %+v %v", got, err)
		}
		past := []lifecycle.PlugLogLine{{Run: 1, Seq: lifecycle.MaxPlugLogLines + 2, Msg: "past"}}
		if err := s.AppendPlugLog(ctx, "s", past); err == nil || !strings.Contains(err.Error(), "a run keeps lines 1 to") {
			t.Fatalf("a line past the cap: %v", err)
		}
	})
}
