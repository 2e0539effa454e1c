package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// dialect is what differs between SQLite and PostgreSQL; every query is
// written once, for SQLite, and rebound here.
type dialect struct {
	// dollar: placeholders are $1, $2 … instead of ?.
	dollar bool
	// types fill the {{…}} of the migrations.
	types *strings.Replacer
	// forUpdate locks the rows a transaction reads; SQLite needs none,
	// its transactions take the write lock when they begin.
	forUpdate string
	// lockSchema serialises servers that migrate one database at once.
	lockSchema string
}

var (
	sqliteDialect = &dialect{
		types: strings.NewReplacer("{{bytes}}", "BLOB", "{{serial}}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{{name}}", "TEXT"),
	}
	postgresDialect = &dialect{
		dollar:     true,
		types:      strings.NewReplacer("{{bytes}}", "BYTEA", "{{serial}}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "{{name}}", `TEXT COLLATE "C"`),
		forUpdate:  " FOR UPDATE",
		lockSchema: "SELECT pg_advisory_xact_lock(4242134501)", // any number of our own
	}
)

// rebind turns the ? placeholders of query into the dialect's.
func (d *dialect) rebind(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sqliteParams make every pooled connection wait for a lock rather than
// fail (busy_timeout, for other processes on the file), log ahead (WAL:
// readers do not wait for the writer), sync each commit (FULL: a commit
// survives a power cut) and enforce the schema's foreign keys.
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"

// SQLitePath returns the file of a DSN that names a SQLite database (PATH
// or sqlite:PATH), and false for any other DSN.
func SQLitePath(dsn string) (string, bool) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok && strings.Contains(dsn, "://") {
		return "", false
	}
	return path, true
}

// connect opens the database a DSN names: a PostgreSQL URL, or a SQLite
// file (PATH or sqlite:PATH). It returns a pool for reads and one for
// writes, which for SQLite is a single connection whose transactions begin
// IMMEDIATE: writes queue in this process instead of failing with
// SQLITE_BUSY. where names the database in errors, without a password.
func connect(dsn string) (read, write *sql.DB, d *dialect, where string, err error) {
	switch {
	case dsn == "":
		return nil, nil, nil, "", errors.New("no database: want a file path, sqlite:PATH or postgres://…")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, nil, nil, "", fmt.Errorf("database URL: %v", redactParseError(err))
		}
		where = "database " + u.Redacted()
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, nil, nil, "", fmt.Errorf("%s: %w", where, err)
		}
		bound(db, MaxConns)
		return db, db, postgresDialect, where, nil
	}
	path, ok := SQLitePath(dsn)
	if !ok {
		return nil, nil, nil, "", fmt.Errorf("database %q: want a file path, sqlite:PATH or postgres://…", dsn)
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, nil, nil, "", fmt.Errorf("database %q: want a SQLite file path without '?' or '#'", dsn)
	}
	where = "SQLite database " + path
	// SQLite's own error for a missing directory says only that it is
	// "unable to open database file".
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, nil, nil, "", fmt.Errorf("%s: %w", where, err)
	}
	// A new database is made 0600 (an empty file is an empty database):
	// it holds transcripts, and SQLite gives its -wal and -shm files the
	// database's mode.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, nil, nil, "", fmt.Errorf("%s: %w", where, err)
	}
	write, err = sql.Open("sqlite", path+"?"+sqliteParams+"&_txlock=immediate")
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("%s: %w", where, err)
	}
	bound(write, 1)
	read, err = sql.Open("sqlite", path+"?"+sqliteParams)
	if err != nil {
		write.Close()
		return nil, nil, nil, "", fmt.Errorf("%s: %w", where, err)
	}
	bound(read, MaxConns)
	return read, write, sqliteDialect, where, nil
}

// Pools are bounded: a burst of requests queues for a connection rather
// than opening one each (a descriptor each, on SQLite; a backend process
// each, on PostgreSQL), and what a burst opened is closed once idle.
const (
	// MaxConns bounds a pool of reads (SQLite) or of everything
	// (PostgreSQL).
	MaxConns = 16
	// maxIdleConns stay open between requests.
	maxIdleConns = 4
	// maxIdleTime is how long an idle connection beyond those stays.
	maxIdleTime = time.Minute
)

func bound(db *sql.DB, open int) {
	db.SetMaxOpenConns(open)
	db.SetMaxIdleConns(min(open, maxIdleConns))
	db.SetConnMaxIdleTime(maxIdleTime)
}

// redactParseError drops the URL from a url.Parse error: it may hold a
// password.
func redactParseError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs queries written for SQLite in the dialect of its database,
// telling s.Observe how long each took.
type conn struct {
	q querier
	d *dialect
	s *handles
}

func (c conn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	defer c.s.observe(query, time.Now())
	return c.q.ExecContext(ctx, c.d.rebind(query), args...)
}

func (c conn) rows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	defer c.s.observe(query, time.Now())
	return c.q.QueryContext(ctx, c.d.rebind(query), args...)
}

func (c conn) row(ctx context.Context, query string, args ...any) *sql.Row {
	defer c.s.observe(query, time.Now())
	return c.q.QueryRowContext(ctx, c.d.rebind(query), args...)
}

// observe tells Observe how long a statement took, named by its first
// word (SELECT, INSERT …).
func (s *handles) observe(query string, start time.Time) {
	if s.Observe == nil {
		return
	}
	verb, _, _ := strings.Cut(strings.TrimSpace(query), " ")
	s.Observe(strings.ToLower(verb), time.Since(start))
}

// affected is the number of rows a statement changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
