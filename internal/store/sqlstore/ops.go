package sqlstore

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Ready says whether the database answers and its schema is this
// binary's.
func (s *Store) Ready(ctx context.Context) error {
	ms, err := schema()
	if err != nil {
		return err
	}
	var have int
	if err := s.read.row(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&have); err != nil {
		return fmt.Errorf("%s: %w", s.where, err)
	}
	if want := ms[len(ms)-1].version; have != want {
		return fmt.Errorf("%s: schema version %d, want %d", s.where, have, want)
	}
	return nil
}

// Names in a backup archive: a data directory's.
const (
	BackupDB          = "blaise.db"
	BackupTranscripts = "transcripts"
)

// Backup writes to file a tar archive of the store, taken while it
// serves: BackupDB, a snapshot of the SQLite database (VACUUM INTO: one
// read transaction, so consistent), then the transcripts' files under
// BackupTranscripts. The files are copied after the snapshot, so they
// hold every line its rows point at; lines written since are past the
// last row and are cut when the store opens them. Extracted into an
// empty directory with the store key beside it, the archive is a data
// directory. PostgreSQL is backed up with pg_dump instead.
func (s *Store) Backup(ctx context.Context, file string) (err error) {
	if s.d != sqliteDialect {
		return fmt.Errorf("%s: back up PostgreSQL with pg_dump, then the transcripts directory (docs/server.md#backups)", s.where)
	}
	snap := file + ".db.tmp"
	os.Remove(snap)
	defer os.Remove(snap)
	if _, err := s.read.exec(ctx, "VACUUM INTO ?", snap); err != nil {
		return fmt.Errorf("%s: snapshot into %s: %w", s.where, snap, err)
	}
	tmp := file + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	tw := tar.NewWriter(out)
	if err := addFile(tw, snap, BackupDB); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.transcripts.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("transcript directory: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), transcriptExt) {
			continue
		}
		err := addFile(tw, filepath.Join(s.transcripts.dir, e.Name()), BackupTranscripts+"/"+e.Name())
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // a session removed meanwhile
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	return syncDir(filepath.Dir(file))
}

// addFile adds the bytes path has now as name: a file appended to
// meanwhile gives what it had when it was looked at.
func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// SessionCount is the number of sessions of an agent in a state.
type SessionCount struct {
	Agent string
	State string
	N     int64
}

// CountSessions counts the sessions by agent and state, from the index
// on both.
func (s *Store) CountSessions(ctx context.Context) ([]SessionCount, error) {
	rows, err := s.read.rows(ctx, "SELECT agent_name, state, COUNT(*) FROM sessions GROUP BY agent_name, state")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.where, err)
	}
	defer rows.Close()
	var out []SessionCount
	for rows.Next() {
		var c SessionCount
		if err := rows.Scan(&c.Agent, &c.State, &c.N); err != nil {
			return nil, fmt.Errorf("%s: %w", s.where, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
