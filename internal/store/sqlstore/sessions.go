package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

func checkSessionID(id string) error { return lifecycle.CheckID("session id", id) }

func notFound(id string) error { return fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound) }

// NewSessionID returns a fresh random id (session.NewID); at 60 bits, a
// collision is left to CreateSession to refuse.
func (s *sessionStore) NewSessionID() string { return lifecycle.NewID() }

// CreateSession stores a new session. Created (and Updated) are set to now
// when zero. It fails, wrapping ErrExists, when the id is in use.
func (s *sessionStore) CreateSession(ctx context.Context, rec *lifecycle.Record) error {
	if err := checkSessionID(rec.ID); err != nil {
		return err
	}
	return s.createSession(ctx, s.writer(), rec)
}

// CreateSessions stores many new sessions in one transaction, as
// CreateSession does each: all of them, or, on an error, none. An import
// (and the benchmarks' generator) takes it, as a commit each would be slow.
func (s *sessionStore) CreateSessions(ctx context.Context, recs []*lifecycle.Record) error {
	for _, rec := range recs {
		if err := checkSessionID(rec.ID); err != nil {
			return err
		}
	}
	return s.inTx(ctx, func(c conn) error {
		for _, rec := range recs {
			if err := s.createSession(ctx, c, rec); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *sessionStore) createSession(ctx context.Context, c conn, rec *lifecycle.Record) error {
	if rec.Created.IsZero() {
		rec.Created = s.now()
	}
	if rec.Updated.IsZero() {
		rec.Updated = rec.Created
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("session %s: %w", rec.ID, err)
	}
	n, err := affected(c.exec(ctx,
		"INSERT INTO sessions (id, "+sessionColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
		append([]any{rec.ID}, columnValues(rec, data)...)...))
	if err != nil {
		return fmt.Errorf("session %s: %s: %w", rec.ID, s.where, err)
	}
	if n == 0 {
		return fmt.Errorf("session %s %w", rec.ID, ErrExists)
	}
	return nil
}

// Session returns a session's record, or an error wrapping
// session.ErrNotFound.
func (s *sessionStore) Session(ctx context.Context, id string) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	return s.readSession(ctx, s.read, id, "")
}

// readSession reads and decodes a session's record; lock is appended to
// the query (the dialect's FOR UPDATE, in a transaction).
func (s *sessionStore) readSession(ctx context.Context, c conn, id, lock string) (*lifecycle.Record, error) {
	var data string
	err := c.row(ctx, "SELECT record FROM sessions WHERE id = ?"+lock, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %s: %w", id, s.where, err)
	}
	return decodeRecord(id, data)
}

// decodeRecord decodes a stored record, refusing one that is not the
// record of id.
func decodeRecord(id, data string) (*lifecycle.Record, error) {
	rec := new(lifecycle.Record)
	if err := json.Unmarshal([]byte(data), rec); err != nil {
		return nil, fmt.Errorf("session %s: its stored record is corrupt: %v", id, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("session %s: its stored record is corrupt: it is the record of session %q", id, rec.ID)
	}
	return rec, nil
}

// UpdateSession changes a session's record in a transaction that holds it
// (FOR UPDATE on PostgreSQL; SQLite's one writer): it reads the record,
// calls f, sets Updated and writes the record. An error from f writes
// nothing. f must not call the Store.
func (s *sessionStore) UpdateSession(ctx context.Context, id string, f func(*lifecycle.Record) error) (*lifecycle.Record, error) {
	return s.updateSession(ctx, id, f, nil)
}

// updateSession is UpdateSession, with after run in the same transaction
// once the record is written.
func (s *sessionStore) updateSession(ctx context.Context, id string, f func(*lifecycle.Record) error, after func(conn, *lifecycle.Record) error) (*lifecycle.Record, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	var rec *lifecycle.Record
	err := s.inTx(ctx, func(c conn) error {
		var err error
		if rec, err = s.readSession(ctx, c, id, s.d.forUpdate); err != nil {
			return err
		}
		if err := lifecycle.ApplyUpdate(rec, f, s.now()); err != nil {
			return err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		if err := s.writeColumns(ctx, c, rec, data); err != nil {
			return fmt.Errorf("session %s: %s: %w", id, s.where, err)
		}
		if after != nil {
			return after(c, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// sessionColumns are the columns of sessions besides id, in the order of
// columnValues: the record, and the fields of it that queries find
// sessions by.
const sessionColumns = "agent_name, state, runs, created, updated, due, owner, runner, title, record"

func columnValues(rec *lifecycle.Record, data []byte) []any {
	return []any{rec.AgentName, string(rec.State), rec.Runs, rec.Created.UnixNano(), rec.Updated.UnixNano(),
		lifecycle.DueKey(rec), rec.Owner, rec.Runner, rec.Title, string(data)}
}

// writeColumns writes rec, encoded as data, to its row.
func (s *sessionStore) writeColumns(ctx context.Context, c conn, rec *lifecycle.Record, data []byte) error {
	set := strings.ReplaceAll(sessionColumns, ",", " = ?,") + " = ?"
	if _, err := c.exec(ctx, "UPDATE sessions SET "+set+" WHERE id = ?", append(columnValues(rec, data), rec.ID)...); err != nil {
		return fmt.Errorf("session %s: %s: %w", rec.ID, s.where, err)
	}
	return nil
}

// indexRecords fills the columns of the rows written before they were
// (due NULL) from their records, once, when the store opens. A record that
// cannot be decoded is left: it is never due, and listed by what its row
// says.
func (s *sessionStore) indexRecords(ctx context.Context) error {
	for {
		var ids, records []string
		err := func() error {
			rows, err := s.read.rows(ctx, "SELECT id, record FROM sessions WHERE due IS NULL LIMIT 500")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, data string
				if err := rows.Scan(&id, &data); err != nil {
					return err
				}
				ids = append(ids, id)
				records = append(records, data)
			}
			return rows.Err()
		}()
		if err != nil {
			return fmt.Errorf("%s: indexing sessions: %w", s.where, err)
		}
		if len(ids) == 0 {
			return nil
		}
		// Only rows still unindexed: another server on the database may
		// have written a newer record meanwhile, with its columns.
		err = s.inTx(ctx, func(c conn) error {
			for i, id := range ids {
				rec, err := decodeRecord(id, records[i])
				if err != nil {
					rec = &lifecycle.Record{} // never due; found by its other columns
				}
				if _, err := c.exec(ctx, "UPDATE sessions SET due = ?, owner = ?, runner = ?, title = ? WHERE id = ? AND due IS NULL",
					lifecycle.DueKey(rec), rec.Owner, rec.Runner, rec.Title, id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: indexing sessions: %w", s.where, err)
		}
	}
}

// DueSessions finds what a sweep at now looks at through the indexes of
// state and due, reading no record.
func (s *sessionStore) DueSessions(ctx context.Context, now time.Time) (ids []string, next time.Time, err error) {
	at := now.UnixNano()
	rows, err := s.read.rows(ctx, "SELECT id FROM sessions WHERE state = ? UNION SELECT id FROM sessions WHERE due > 0 AND due <= ?", string(lifecycle.Active), at)
	if err != nil {
		return nil, next, fmt.Errorf("%s: sessions due: %w", s.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, next, fmt.Errorf("%s: sessions due: %w", s.where, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, next, fmt.Errorf("%s: sessions due: %w", s.where, err)
	}
	var n sql.NullInt64
	if err := s.read.row(ctx, "SELECT MIN(due) FROM sessions WHERE due > ?", at).Scan(&n); err != nil {
		return nil, next, fmt.Errorf("%s: sessions due: %w", s.where, err)
	}
	if n.Valid {
		next = time.Unix(0, n.Int64)
	}
	return ids, next, nil
}

// Sessions returns every session, sorted by Created, then ID. Records that
// cannot be decoded do not hide the others: they are returned with a
// *blaise.BrokenError naming each broken one, as the file store does.
func (s *sessionStore) Sessions(ctx context.Context) ([]*lifecycle.Record, error) {
	rows, err := s.read.rows(ctx, "SELECT id, record FROM sessions ORDER BY created, id")
	if err != nil {
		return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	defer rows.Close()
	var recs []*lifecycle.Record
	var broken lifecycle.BrokenError
	for rows.Next() {
		var id, data string
		if err := rows.Scan(&id, &data); err != nil {
			return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
		}
		rec, err := decodeRecord(id, data)
		if err != nil {
			broken.Records = append(broken.Records, lifecycle.BrokenRecord{ID: id, Err: err})
			continue
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	if len(broken.Records) > 0 {
		return recs, &broken
	}
	return recs, nil
}

// CurrentRun returns the number of a session's latest run and its state:
// the server fences a run's writes with it (a run the server has failed or
// replaced writes no more).
func (s *sessionStore) CurrentRun(ctx context.Context, id string) (run int, state lifecycle.State, err error) {
	if err := checkSessionID(id); err != nil {
		return 0, "", err
	}
	var st string
	err = s.read.row(ctx, "SELECT runs, state FROM sessions WHERE id = ?", id).Scan(&run, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", notFound(id)
	}
	if err != nil {
		return 0, "", fmt.Errorf("session %s: %s: %w", id, s.where, err)
	}
	return run, lifecycle.State(st), nil
}

// Discard removes a session with all it stored: its record, persisted
// state and transcript's chunks (the schema's cascade), then its
// transcript's file; a file left by a failure is removed at a later
// start's first append.
func (s *sessionStore) Discard(ctx context.Context, id string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if _, err := s.writer().exec(ctx, "DELETE FROM sessions WHERE id = ?", id); err != nil {
		return fmt.Errorf("session %s: removing it: %s: %w", id, s.where, err)
	}
	return s.ts.removeTranscript(id)
}

// Loaded records a run's first report (session.RecordLoaded).
func (s *sessionStore) Loaded(ctx context.Context, id string, l lifecycle.Loaded) error {
	return lifecycle.RecordLoaded(ctx, s, id, l)
}

// Titled records the session's title (lifecycle.RecordTitle); the title
// column, which lists search, follows the record.
func (s *sessionStore) Titled(ctx context.Context, id, title string) error {
	return lifecycle.RecordTitle(ctx, s, id, title)
}

// Paused records a reported pause (session.RecordPaused).
func (s *sessionStore) Paused(ctx context.Context, id string, p lifecycle.PauseRecord) (*lifecycle.Record, error) {
	return lifecycle.RecordPaused(ctx, s, id, p)
}

// TornDown records a teardown's outcome: the session ends and, in the same
// transaction, its persisted state goes; or a retry is due (L2).
func (s *sessionStore) TornDown(ctx context.Context, id string, failure error, at time.Time) (*lifecycle.Record, error) {
	return s.updateSession(ctx, id, func(r *lifecycle.Record) error {
		lifecycle.ApplyTeardown(r, failure, at)
		return nil
	}, func(c conn, r *lifecycle.Record) error {
		if r.State != lifecycle.Ended {
			return nil
		}
		return s.ps.deletePersisted(ctx, c, id)
	})
}

// ListQuery is a page of the sessions list: the sessions matching every
// filter given, newest first (by Created, then ID), or oldest first, after
// the cursor of the page before.
type ListQuery struct {
	Agent, State, Runner string
	// Owner, when not nil: only the sessions opened with an API token of
	// this name ("": with none).
	Owner *string
	// Text: only sessions whose title holds it, in any case, or whose id
	// starts with it.
	Text string
	// Limit is the page's size, at least 1.
	Limit int
	// After is the cursor of the page before (ListPage.Next); "" for the
	// first.
	After string
	// Oldest lists the oldest first: the same indexes, read the other way.
	Oldest bool
}

// ListPage is a page of the sessions list.
type ListPage struct {
	Sessions []*lifecycle.Record
	// Next is the cursor of the page after this one; "" when this one is
	// the last.
	Next string
}

// ErrCursor is wrapped in the error for a cursor this store did not give.
var ErrCursor = errors.New("not a cursor of this list")

// ListSessions returns a page of the sessions list, from the indexes of
// its filters and of Created: a page costs the same whatever the number
// of sessions stored, but for a Text filter, which reads the titles of
// the newest sessions until the page is full. Records that cannot be
// decoded do not hide the others: they are returned with a
// *blaise.BrokenError naming each broken one.
func (s *sessionStore) ListSessions(ctx context.Context, q ListQuery) (ListPage, error) {
	if q.Limit < 1 {
		return ListPage{}, fmt.Errorf("listing sessions: limit %d: want at least 1", q.Limit)
	}
	var where []string
	var args []any
	for _, f := range []struct{ col, val string }{{"agent_name", q.Agent}, {"state", q.State}, {"runner", q.Runner}} {
		if f.val != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.val)
		}
	}
	if q.Owner != nil {
		where = append(where, "owner = ?")
		args = append(args, *q.Owner)
	}
	if q.Text != "" {
		where = append(where, "(LOWER(title) LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\')")
		args = append(args, "%"+likeEscaper.Replace(strings.ToLower(q.Text))+"%", likeEscaper.Replace(q.Text)+"%")
	}
	if q.After != "" {
		created, id, err := parseCursor(q.After)
		if err != nil {
			return ListPage{}, err
		}
		cmp := "<"
		if q.Oldest {
			cmp = ">"
		}
		where = append(where, "(created "+cmp+" ? OR (created = ? AND id "+cmp+" ?))")
		args = append(args, created, created, id)
	}
	query := "SELECT id, created, record FROM sessions"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	order := " DESC"
	if q.Oldest {
		order = ""
	}
	query += " ORDER BY created" + order + ", id" + order + " LIMIT ?"
	args = append(args, q.Limit+1) // one more: is there a page after?
	rows, err := s.read.rows(ctx, query, args...)
	if err != nil {
		return ListPage{}, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	defer rows.Close()
	var page ListPage
	var broken lifecycle.BrokenError
	n := 0
	for rows.Next() {
		var id, data string
		var created int64
		if err := rows.Scan(&id, &created, &data); err != nil {
			return ListPage{}, fmt.Errorf("%s: listing sessions: %w", s.where, err)
		}
		n++
		if n > q.Limit {
			break
		}
		page.Next = fmt.Sprintf("%d.%s", created, id)
		rec, err := decodeRecord(id, data)
		if err != nil {
			broken.Records = append(broken.Records, lifecycle.BrokenRecord{ID: id, Err: err})
			continue
		}
		page.Sessions = append(page.Sessions, rec)
	}
	if err := rows.Err(); err != nil {
		return ListPage{}, fmt.Errorf("%s: listing sessions: %w", s.where, err)
	}
	if n <= q.Limit {
		page.Next = ""
	}
	if len(broken.Records) > 0 {
		return page, &broken
	}
	return page, nil
}

// likeEscaper escapes what LIKE takes for wildcards.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// parseCursor reads a cursor of ListPage.Next: the created time and id of
// the last session of its page.
func parseCursor(c string) (created int64, id string, err error) {
	num, id, ok := strings.Cut(c, ".")
	created, perr := strconv.ParseInt(num, 10, 64)
	if !ok || perr != nil || checkSessionID(id) != nil {
		return 0, "", fmt.Errorf("cursor %q: %w", c, ErrCursor)
	}
	return created, id, nil
}
