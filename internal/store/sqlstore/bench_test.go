package sqlstore

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/store/sessiongen"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// BenchmarkStores compares the file store and SQLite, both durable (fsync
// per write), creating and updating a session, listing 1,000, finding
// what is due among 1,000 (a sweep's question), setting
// persisted state and appending a megabyte of transcript lines (with the
// CPU time of the process per append), in one run:
// `go test ./internal/store/sqlstore -bench . -run '^$'`; docs/server.md reports the
// ratios.
func BenchmarkStores(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) lifecycle.Store
	}{
		{"file", func(b *testing.B) lifecycle.Store {
			s, err := filestore.OpenStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"sqlite", func(b *testing.B) lifecycle.Store { return open(b, filepath.Join(b.TempDir(), "blaise.db"), newKey()) }},
	}
	for _, st := range stores {
		b.Run("CreateUpdate/"+st.name, func(b *testing.B) {
			s := st.open(b)
			i := 0
			for b.Loop() {
				id := "s" + strconv.Itoa(i)
				i++
				if err := s.CreateSession(b.Context(), &lifecycle.Record{ID: id, State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.UpdateSession(b.Context(), id, func(r *lifecycle.Record) error { r.Runs++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("List1000/"+st.name, func(b *testing.B) {
			s := st.open(b)
			for i := range 1000 {
				if err := s.CreateSession(b.Context(), &lifecycle.Record{ID: "s" + strconv.Itoa(i), State: lifecycle.Paused, Settings: lifecycle.DefaultSettings()}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if recs, err := s.Sessions(b.Context()); err != nil || len(recs) != 1000 {
					b.Fatalf("Sessions: %d, %v", len(recs), err)
				}
			}
		})
		// What a sweep asks at each run's end: the file store reads every
		// record, SQLite its indexes.
		b.Run("DueSessions1000/"+st.name, func(b *testing.B) {
			s := st.open(b)
			now := time.Now()
			for _, r := range sessiongen.Records(1000, "a", "gen", now) {
				if err := s.CreateSession(b.Context(), r); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if ids, _, err := s.DueSessions(context.Background(), now); err != nil || len(ids) != 0 {
					b.Fatalf("DueSessions: %v, %v", ids, err)
				}
			}
		})
		b.Run("TranscriptAppend1MiB/"+st.name, func(b *testing.B) {
			s := st.open(b)
			if err := s.CreateSession(b.Context(), &lifecycle.Record{ID: "s", State: lifecycle.Active}); err != nil {
				b.Fatal(err)
			}
			w, err := s.Transcript(b.Context(), "s")
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			line := append(bytes.Repeat([]byte("x"), 1023), '\n')
			chunk := bytes.Repeat(line, 1024)
			b.SetBytes(int64(len(chunk)))
			cpu0 := testsupport.ProcessCPU(b)
			for b.Loop() {
				if _, err := w.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testsupport.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run("PersistedSet/"+st.name, func(b *testing.B) {
			s := st.open(b)
			if err := s.CreateSession(b.Context(), &lifecycle.Record{ID: "s", State: lifecycle.Active}); err != nil {
				b.Fatal(err)
			}
			p, value := s.Persisted(), []byte(`{"branch":"blaise/s","path":"/work/trees/s"}`)
			for b.Loop() {
				if err := p.Set(context.Background(), "s", "wt", "blaise:worktree", value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
