package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/klauspost/compress/flate"
)

// deflated is lines deflated, repeated n times, as a chunk stored before
// transcripts had files.
func deflated(t *testing.T, lines string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestSpeed)
	for range n {
		io.WriteString(w, lines)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads a transcript to its end, and returns its first 100 bytes.
func readAll(t *testing.T, s *Store, id string) (string, error) {
	t.Helper()
	r, err := s.ReadTranscript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var head bytes.Buffer
	_, err = io.Copy(io.Discard, io.TeeReader(r, writerFunc(func(p []byte) (int, error) {
		head.Write(p[:min(len(p), max(0, 100-head.Len()))])
		return len(p), nil
	})))
	return head.String(), err
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// write appends lines to a session's transcript through a writer of its
// own.
func write(t *testing.T, s *Store, id string, lines ...string) {
	t.Helper()
	w, err := s.Transcript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// insertDeflated stores a chunk as stores did before transcripts had
// files: its lines deflated in the row.
func insertDeflated(t *testing.T, s *Store, id string, chunk []byte) {
	t.Helper()
	if _, err := s.writer().exec(context.Background(), "INSERT INTO transcript_chunks (session_id, lines) VALUES (?, ?)", id, chunk); err != nil {
		t.Fatal(err)
	}
}

// TestTranscriptLinesAreInTheSessionsFile: a session's transcript lines are
// in a file of the transcript directory (0600), as they were written, and
// the database's rows hold none of their bytes.
func TestTranscriptLinesAreInTheSessionsFile(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		long := strings.Repeat("x", 100<<10) // a large write, as a stream's
		write(t, s, "s", "{\"a\":1}\n", "{\"b\":\""+long+"\"}\n")
		path := filepath.Join(transcriptDir(t, dsn), "s.jsonl")
		got, err := os.ReadFile(path)
		if want := "{\"a\":1}\n{\"b\":\"" + long + "\"}\n"; err != nil || string(got) != want {
			t.Fatalf("%s: %d bytes, %v; want the %d written", path, len(got), err, len(want))
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
		}
		var inRows int64
		if err := s.read.row(context.Background(), "SELECT COALESCE(SUM(LENGTH(lines)), 0) FROM transcript_chunks").Scan(&inRows); err != nil || inRows != 0 {
			t.Errorf("the rows hold %d bytes of lines (%v), want none", inRows, err)
		}
	})
}

// TestTranscriptFileIsCutToItsCommittedRows: bytes past what the committed
// rows account for (a server that stopped between writing a chunk's lines
// and committing its row) are never read, and are cut when the file is next
// appended to; a file shorter than its rows lost lines, which reading and
// appending say, naming the file.
func TestTranscriptFileIsCutToItsCommittedRows(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		write(t, s, "s", "{\"a\":1}\n")
		path := filepath.Join(transcriptDir(t, dsn), "s.jsonl")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(f, "{\"uncommitted\":1}\n{\"half")
		f.Close()
		s.Close()
		s = open(t, dsn, newKey())
		if got, err := readAll(t, s, "s"); err != nil || got != "{\"a\":1}\n" {
			t.Fatalf("read %q, %v; want only the committed line", got, err)
		}
		write(t, s, "s", "{\"b\":2}\n")
		want := "{\"a\":1}\n{\"b\":2}\n"
		if got, err := readAll(t, s, "s"); err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Fatalf("the file holds %q after the next append, want %q", got, want)
		}

		if err := os.Truncate(path, 3); err != nil {
			t.Fatal(err)
		}
		_, err = readAll(t, s, "s")
		testsupport.WantErr(t, err, "session s", path, "lines are lost")
		w, err := s.Transcript(t.Context(), "s")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.WriteString(w, "{\"c\":3}\n")
		testsupport.WantErr(t, err, "session s", path, "has 3 bytes", "account for 16", "lines are lost")
		w.Close()
	})
}

// TestTranscriptWritersShareTheFileUntilDiscarded: the writers of one
// session share its file, and its chunks keep the order of their writes; a
// discarded session's file goes, its writer's next append fails, and a new
// session of the same id starts an empty file.
func TestTranscriptWritersShareTheFileUntilDiscarded(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		a, _ := s.Transcript(t.Context(), "s")
		b, _ := s.Transcript(t.Context(), "s")
		for i, w := range []io.Writer{a, b, a, b} {
			io.WriteString(w, "{\"n\":"+string(rune('0'+i))+"}\n")
		}
		want := "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
		if got, err := readAll(t, s, "s"); err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		b.Close()
		path := filepath.Join(transcriptDir(t, dsn), "s.jsonl")
		if err := s.Discard(t.Context(), "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s after the session was discarded: %v", path, err)
		}
		_, err := io.WriteString(a, "{\"late\":1}\n")
		testsupport.WantErr(t, err, "session s", "discarded")
		// The discarded session's last writer closes once the new one's
		// writers share its file: they go on sharing it.
		storetest.Create(t, s, "s")
		n, _ := s.Transcript(t.Context(), "s")
		io.WriteString(n, "{\"new\":1}\n")
		a.Close()
		m, _ := s.Transcript(t.Context(), "s")
		for i, w := range []io.Writer{m, n, m} {
			io.WriteString(w, "{\"next\":"+string(rune('0'+i))+"}\n")
		}
		n.Close()
		m.Close()
		want = "{\"new\":1}\n{\"next\":0}\n{\"next\":1}\n{\"next\":2}\n"
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Fatalf("the new session's file holds %q, want %q", got, want)
		}
		if got, err := readAll(t, s, "s"); err != nil || got != want {
			t.Fatalf("the new session's transcript: %q, %v", got, err)
		}
	})
}

// TestFilesOfUnknownSessionsAreRemovedAtTheFirstAppend: the store's first
// append takes the transcript directory's lock and removes the files of
// sessions the database does not hold (a discard whose file could not be
// removed); it keeps the others and files of other names. A store that only
// reads leaves the directory as it is.
func TestFilesOfUnknownSessionsAreRemovedAtTheFirstAppend(t *testing.T) {
	dsn := databases[0].dsn(t)
	s := open(t, dsn, newKey())
	storetest.Create(t, s, "kept")
	storetest.Create(t, s, "other")
	write(t, s, "kept", "{\"a\":1}\n")
	s.Close()
	dir := transcriptDir(t, dsn)
	for _, name := range []string{"gone.jsonl", "notes.txt"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o600)
	}
	names := func() string {
		var names []string
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return strings.Join(names, " ")
	}
	s = open(t, dsn, newKey())
	if got, err := readAll(t, s, "kept"); err != nil || got != "{\"a\":1}\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	if got := names(); got != ".lock gone.jsonl kept.jsonl notes.txt" {
		t.Fatalf("after reading, the transcript directory holds %s", got)
	}
	write(t, s, "other", "{\"b\":2}\n")
	if got := names(); got != ".lock kept.jsonl notes.txt other.jsonl" {
		t.Fatalf("after the first append, the transcript directory holds %s, want gone.jsonl removed", got)
	}
}

// TestOneStoreAppendsToATranscriptDirectory: one store appends to a
// transcript directory: another store of the same database (a second server)
// is refused its appends, with an error that says why, until the first is
// closed.
func TestOneStoreAppendsToATranscriptDirectory(t *testing.T) {
	dsn := databases[0].dsn(t)
	a := open(t, dsn, newKey())
	storetest.Create(t, a, "s")
	write(t, a, "s", "{\"a\":1}\n")
	b := open(t, dsn, newKey())
	w, err := b.Transcript(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(w, "{\"b\":2}\n")
	testsupport.WantErr(t, err, "session s", transcriptDir(t, dsn), "another store appends to it", "a database has one server")
	w.Close()
	a.Close()
	write(t, b, "s", "{\"c\":3}\n")
	if got, err := readAll(t, b, "s"); err != nil || got != "{\"a\":1}\n{\"c\":3}\n" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestChunksStoredDeflatedBeforeAreRead: chunks stored deflated in their
// rows, before transcripts had files, are read in order with those in the
// file, by ReadTranscript and by TranscriptChunks and TranscriptWindow.
func TestChunksStoredDeflatedBeforeAreRead(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		// Two streams, one after the other, as a batch of appends had them.
		insertDeflated(t, s, "s", append(deflated(t, "{\"a\":1}\n", 1), deflated(t, "{\"b\":2}\n", 1)...))
		write(t, s, "s", "{\"c\":3}\n")
		insertDeflated(t, s, "s", deflated(t, "{\"d\":4}\n", 1))
		write(t, s, "s", "{\"e\":5}\n")
		want := "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n{\"e\":5}\n"
		if got, err := readAll(t, s, "s"); err != nil || got != want {
			t.Errorf("transcript %q, %v; want %q", got, err, want)
		}
		last, err := s.TranscriptLast(t.Context(), "s")
		if err != nil {
			t.Fatal(err)
		}
		if lines := readChunks(t, s, "s", 0, last); lines != want {
			t.Fatalf("TranscriptChunks: %q; want %q", lines, want)
		}
		write(t, s, "s", "{\"f\":6}\n")
		if lines := readChunks(t, s, "s", last, math.MaxInt64); lines != "{\"f\":6}\n" {
			t.Errorf("TranscriptChunks after the last chunk read: %q", lines)
		}
		if after, _, err := s.TranscriptWindow(t.Context(), "s", math.MaxInt64, 1); err != nil || readChunks(t, s, "s", after, math.MaxInt64) != "{\"f\":6}\n" {
			t.Errorf("a window of the last chunk starts after %d, %v", after, err)
		}
	})
}

// readChunks reads the chunks of session id numbered after after up to to.
func readChunks(t *testing.T, s *Store, id string, after, to int64) string {
	t.Helper()
	r, err := s.TranscriptChunks(t.Context(), id, after, to)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBadDeflatedChunkEndsTheTranscriptWithAnError: a chunk stored deflated
// that does not inflate, or inflates without end, ends the reading of the
// transcript with an error that names the session, after the lines before it
// (and, streamed, what came of the chunk before its end).
func TestBadDeflatedChunkEndsTheTranscriptWithAnError(t *testing.T) {
	s := open(t, databases[0].dsn(t), newKey())
	for _, c := range []struct {
		id, want string
		chunk    []byte
	}{
		{"garbage", "does not inflate", []byte("not deflate")},
		{"bomb", "deflate stream inflates to more than", deflated(t, strings.Repeat("x", 1<<20), maxChunk>>20+1)},
	} {
		storetest.Create(t, s, c.id)
		write(t, s, c.id, "{\"a\":1}\n")
		insertDeflated(t, s, c.id, c.chunk)
		write(t, s, c.id, "{\"b\":2}\n")
		got, err := readAll(t, s, c.id)
		testsupport.WantErr(t, err, "session "+c.id, c.want)
		if !strings.HasPrefix(got, "{\"a\":1}\n") || strings.Contains(got, "{\"b\"") {
			t.Errorf("%s: read %.100q before the bad chunk", c.id, got)
		}
	}
}

// TestAnAppendWhoseRowIsRefusedLeavesNothingRead: an append whose row the
// database refuses fails with an error that names the session and the
// database's reason; what it wrote to the file is cut, and the session's
// writers, that one and another, go on after the committed lines.
func TestAnAppendWhoseRowIsRefusedLeavesNothingRead(t *testing.T) {
	dsn := databases[0].dsn(t)
	s := open(t, dsn, newKey())
	storetest.Create(t, s, "s")
	write(t, s, "s", "{\"a\":1}\n")
	if _, err := s.writer().exec(context.Background(), `CREATE TRIGGER refuse BEFORE INSERT ON transcript_chunks WHEN NEW.file_size = 8
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Transcript(t.Context(), "s")
	other, _ := s.Transcript(t.Context(), "s")
	_, err := io.WriteString(w, "{\"b\":2}\n")
	testsupport.WantErr(t, err, "session s: transcript: ", "refused by the test")
	if strings.Count(err.Error(), "session s") != 1 {
		t.Errorf("the error names the session more than once: %v", err)
	}
	path := filepath.Join(transcriptDir(t, dsn), "s.jsonl")
	if got, _ := os.ReadFile(path); string(got) != "{\"a\":1}\n" {
		t.Fatalf("after the refused append, the file holds %q", got)
	}
	if _, err := io.WriteString(w, "{\"c\":33}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(other, "{\"d\":44}\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	other.Close()
	want := "{\"a\":1}\n{\"c\":33}\n{\"d\":44}\n"
	if got, err := readAll(t, s, "s"); err != nil || got != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Fatalf("the file holds %q, want %q", got, want)
	}
}

// TestConcurrentWritersLoseNothing: writers of several sessions, several to
// a session, open, append (large lines too)
// and close their transcripts at once, while readers read them: every line
// is kept once, whole, and each writer's lines in the order it wrote them.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		sessions := []string{"s0", "s1", "s2"}
		for _, id := range sessions {
			storetest.Create(t, s, id)
		}
		const writers, lines = 4, 20
		var wg sync.WaitGroup
		for _, id := range sessions {
			for g := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range lines {
						w, err := s.Transcript(t.Context(), id)
						if err != nil {
							t.Error(err)
							return
						}
						pad := ""
						if i%5 == 0 {
							pad = strings.Repeat("y", 70<<10)
						}
						if _, err := fmt.Fprintf(w, "{\"g\":%d,\"i\":%d,\"p\":%q}\n", g, i, pad); err != nil {
							t.Error(err)
						}
						if err := w.Close(); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range lines {
					if _, err := readAll(t, s, id); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		for _, id := range sessions {
			r, err := s.ReadTranscript(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			next := make([]int, writers)
			for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				var rec struct{ G, I int }
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("%s: a line that is not whole: %.80q", id, l)
				}
				if rec.I != next[rec.G] {
					t.Fatalf("%s: writer %d's line %d where its line %d was due", id, rec.G, rec.I, next[rec.G])
				}
				next[rec.G]++
			}
			for g, n := range next {
				if n != lines {
					t.Errorf("%s: writer %d has %d lines of %d", id, g, n, lines)
				}
			}
		}
	})
}

// TestAWriterSharingAFailedOpenIsToldAndRetries: a writer that shares a
// session's file while another writer opens it gets the open's failure, not
// a file that never opened; the session's next append opens the file again,
// and goes on.
func TestAWriterSharingAFailedOpenIsToldAndRetries(t *testing.T) {
	dsn := databases[0].dsn(t)
	s := open(t, dsn, newKey())
	storetest.Create(t, s, "s")
	opening, fail := make(chan struct{}), make(chan struct{})
	openFile = func(path string, end int64) (*os.File, error) {
		close(opening)
		<-fail
		return nil, errors.New("the disk is gone (the test)")
	}
	defer func() { openFile = openTranscriptFile }()
	a, _ := s.Transcript(t.Context(), "s")
	b, _ := s.Transcript(t.Context(), "s")
	aErr := make(chan error, 1)
	go func() {
		_, err := io.WriteString(a, "{\"a\":1}\n")
		aErr <- err
	}()
	<-opening
	bErr := make(chan error, 1)
	go func() {
		_, err := io.WriteString(b, "{\"b\":2}\n")
		bErr <- err
	}()
	testsupport.Eventually(t, "the second writer shares the file being opened", func() bool {
		s.transcripts.mu.Lock()
		defer s.transcripts.mu.Unlock()
		sf := s.transcripts.files["s"]
		return sf != nil && sf.refs == 2
	})
	close(fail)
	testsupport.WantErr(t, <-aErr, "session s", "the disk is gone")
	testsupport.WantErr(t, <-bErr, "session s", "the disk is gone")
	openFile = openTranscriptFile
	for _, w := range []io.WriteCloser{b, a} {
		if _, err := io.WriteString(w, "{\"again\":1}\n"); err != nil {
			t.Fatalf("an append after the failed open: %v", err)
		}
		w.Close()
	}
	if got, err := readAll(t, s, "s"); err != nil || got != "{\"again\":1}\n{\"again\":1}\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	s.transcripts.mu.Lock()
	left := len(s.transcripts.files)
	s.transcripts.mu.Unlock()
	if left != 0 {
		t.Errorf("%d files left open after every writer closed", left)
	}
}

// committedThenFails is a SQLite connection whose next insert of a
// transcript chunk commits and then reports an error, as a connection lost
// at the commit does.
type committedThenFails struct {
	driver.Conn
	fail *bool
}

func (c committedThenFails) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if err == nil && *c.fail && strings.HasPrefix(query, "INSERT INTO transcript_chunks") {
		*c.fail = false
		return nil, errors.New("the connection was lost at the commit (the test)")
	}
	return res, err
}

type committedThenFailsDriver struct {
	driver.Driver
	fail *bool
}

func (d committedThenFailsDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	return committedThenFails{c, d.fail}, err
}

// TestAnAppendCommittedDespiteAnErrorIsKept: an append whose commit went
// through but reported an error is kept: the rows tell, and its lines are
// neither cut nor written again.
func TestAnAppendCommittedDespiteAnErrorIsKept(t *testing.T) {
	dsn := databases[0].dsn(t)
	s := open(t, dsn, newKey())
	storetest.Create(t, s, "s")
	write(t, s, "s", "{\"a\":1}\n")
	fail := true
	old := s.write
	s.write = sql.OpenDB(driverConnector{committedThenFailsDriver{old.Driver(), &fail}, dsn + "?" + sqliteParams + "&_txlock=immediate"})
	old.Close()
	w, _ := s.Transcript(t.Context(), "s")
	if _, err := io.WriteString(w, "{\"b\":2}\n"); err != nil {
		t.Fatalf("an append whose row committed: %v", err)
	}
	if fail {
		t.Fatal("the test's connection did not fail the commit")
	}
	io.WriteString(w, "{\"c\":3}\n")
	w.Close()
	want := "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"
	if got, err := readAll(t, s, "s"); err != nil || got != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// driverConnector opens d's connections to name.
type driverConnector struct {
	d    driver.Driver
	name string
}

func (c driverConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.name) }
func (c driverConnector) Driver() driver.Driver                        { return c.d }

// TestTranscriptReadersHoldNoConnection: a transcript's reader holds no
// database connection while it is read, however slowly: more readers than
// the pool has connections are read at once, across pages of chunks, and
// writes go on meanwhile.
func TestTranscriptReadersHoldNoConnection(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s")
		var lines []string
		for i := range chunkPage + 2 {
			lines = append(lines, fmt.Sprintf("{\"n\":%d}\n", i))
		}
		write(t, s, "s", lines...)
		want := strings.Join(lines, "")
		var readers []io.ReadCloser
		var got []*bytes.Buffer
		for range MaxConns + 4 {
			r, err := s.ReadTranscript(t.Context(), "s")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var b bytes.Buffer
			if _, err := io.CopyN(&b, r, 3); err != nil {
				t.Fatal(err)
			}
			readers, got = append(readers, r), append(got, &b)
		}
		write(t, s, "s", "{\"more\":1}\n")
		for i, r := range readers {
			if _, err := io.Copy(got[i], r); err != nil || got[i].String() != want+"{\"more\":1}\n" {
				t.Fatalf("reader %d: %.100q…, %v", i, got[i].String(), err)
			}
		}
	})
}
