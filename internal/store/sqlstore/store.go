// Package sqlstore is the Blaise server's store (docs/server.md#store): sessions, their
// persisted plug state (encrypted at rest) and transcripts, as
// session.Store, plus the server's agents, runners and tokens, in SQLite
// (one file, one writer) or PostgreSQL. It knows nothing of HTTP.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sealed"
)

// migrations are numbered NNNN_name.sql, applied in order, forward only.
//
//go:embed migrations/*.sql
var migrations embed.FS

var (
	// ErrExists is wrapped in the error for a name or id already in use.
	ErrExists = errors.New("already exists")
	// ErrNotFound is wrapped in the error for an unknown agent, runner or
	// token id; an unknown session gives session.ErrNotFound.
	ErrNotFound = errors.New("not found")
)

// Store keeps the server's state in a SQL database. It opens, migrates,
// backs up and closes the database; the rest it embeds, one part a concern,
// each sharing its handles, so that their methods are the Store's (the
// lifecycle.Store the engine takes is sessions, persisted state and
// transcripts at once).
type Store struct {
	*handles
	*sessionStore
	*persistedStore
	*transcriptStore
	*agentStore
	*tokenStore
	*userStore
}

// handles are the database the parts of a Store share.
type handles struct {
	// read and write are one pool on PostgreSQL; on SQLite, write is the
	// one writing connection.
	read  conn
	db    *sql.DB // read's
	write *sql.DB
	d     *dialect
	where string
	// Clock dates records; nil: the machine's.
	Clock lifecycle.Clock
	// Observe, when set before the store is shared, is told how long
	// each statement took, by its verb (select, insert …).
	Observe func(verb string, took time.Duration)
}

// sessionStore keeps the session records; ending a session clears its
// persisted state and transcript too.
type sessionStore struct {
	*handles
	ps *persistedStore
	ts *transcriptStore
}

// persistedStore keeps the plugs' persisted state, sealed with box.
type persistedStore struct {
	*handles
	box *sealed.Box
}

// transcriptStore keeps the sessions' transcripts.
type transcriptStore struct {
	*handles
	// transcripts are the files of the sessions' transcripts.
	transcripts transcriptFiles
	written     atomic.Int64 // transcript bytes appended
}

// agentStore keeps the server's agents.
type agentStore struct{ *handles }

// tokenStore keeps registration tokens, runners and API tokens.
type tokenStore struct{ *handles }

// userStore keeps the users and their web sessions.
type userStore struct{ *handles }

var _ lifecycle.Store = (*Store)(nil)

// Open opens the database dsn names (a SQLite file: PATH or sqlite:PATH;
// or postgres://…) and brings its schema up to date. key is the 32-byte
// key of persisted plug state (see LoadKey); transcripts is the directory
// of the files that hold the sessions' transcript lines, made, locked and
// cleared of the files of unknown sessions at the first append.
// A database whose schema is newer than this binary is refused.
func Open(ctx context.Context, dsn string, key []byte, transcripts string) (*Store, error) {
	box, err := sealed.New(key)
	if err != nil {
		return nil, fmt.Errorf("store key: %w", err)
	}
	read, write, d, where, err := connect(dsn)
	if err != nil {
		return nil, err
	}
	s := newStore(read, write, d, where, box, transcripts)
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.indexRecords(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newStore makes a Store of its database's handles, its parts sharing them.
func newStore(read, write *sql.DB, d *dialect, where string, box *sealed.Box, transcripts string) *Store {
	h := &handles{db: read, write: write, d: d, where: where}
	h.read = conn{read, d, h}
	ps := &persistedStore{handles: h, box: box}
	ts := &transcriptStore{handles: h, transcripts: transcriptFiles{dir: transcripts}}
	return &Store{
		handles:        h,
		sessionStore:   &sessionStore{handles: h, ps: ps, ts: ts},
		persistedStore: ps, transcriptStore: ts,
		agentStore: &agentStore{h}, tokenStore: &tokenStore{h}, userStore: &userStore{h},
	}
}

// Close closes the transcripts' files and the database.
func (s *Store) Close() error {
	err := errors.Join(s.closeTranscripts(), s.write.Close())
	if s.db != s.write {
		err = errors.Join(err, s.db.Close())
	}
	return err
}

// String names the database, without a password.
func (s *Store) String() string { return s.where }

func (s *handles) now() time.Time {
	var c lifecycle.Clock = lifecycle.RealClock{}
	if s.Clock != nil {
		c = s.Clock
	}
	return c.Now().UTC()
}

// inTx runs f in a write transaction, committing if it returns nil.
func (s *handles) inTx(ctx context.Context, f func(c conn) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.where, err)
	}
	if err := f(conn{tx, s.d, s}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", s.where, err)
	}
	return nil
}

// writer runs single statements outside a transaction.
func (s *handles) writer() conn { return conn{s.write, s.d, s} }

type migration struct {
	version int
	name    string
}

// schema lists the embedded migrations in order.
func schema() ([]migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: want number %04d", e.Name(), len(ms)+1)
		}
		ms = append(ms, migration{v, e.Name()})
	}
	return ms, nil
}

// migrate applies the migrations the database lacks, each in a
// transaction that records its version in schema_version.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := schema()
	if err != nil {
		return err
	}
	return s.migrateTo(ctx, ms, ms[len(ms)-1].version)
}

// migrateTo applies the migrations up to version upto (tests make
// databases of earlier versions with it).
func (s *Store) migrateTo(ctx context.Context, ms []migration, upto int) error {
	latest := ms[len(ms)-1].version
	return s.inTx(ctx, func(c conn) error {
		if s.d.lockSchema != "" {
			if _, err := c.exec(ctx, s.d.lockSchema); err != nil {
				return fmt.Errorf("%s: locking the schema: %w", s.where, err)
			}
		}
		if _, err := c.exec(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, applied BIGINT NOT NULL)"); err != nil {
			return fmt.Errorf("%s: %w", s.where, err)
		}
		var have int
		if err := c.row(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&have); err != nil {
			return fmt.Errorf("%s: reading the schema version: %w", s.where, err)
		}
		if have > latest {
			return fmt.Errorf("%s has schema version %d, newer than this blaise-agent's %d: run a blaise-agent at least as new as the one that wrote it", s.where, have, latest)
		}
		for _, m := range ms[have:max(have, upto)] {
			text, err := fs.ReadFile(migrations, path.Join("migrations", m.name))
			if err != nil {
				return err
			}
			for _, stmt := range statements(s.d.types.Replace(string(text))) {
				if _, err := c.exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: migration %s: %w", s.where, m.name, err)
				}
			}
			if _, err := c.exec(ctx, "INSERT INTO schema_version (version, applied) VALUES (?, ?)", m.version, s.now().UnixNano()); err != nil {
				return fmt.Errorf("%s: migration %s: %w", s.where, m.name, err)
			}
		}
		return nil
	})
}

// statements splits a migration into its statements, which end with a
// semicolon at the end of a line, dropping comment lines.
func statements(text string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}
