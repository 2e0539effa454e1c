package runner_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/blaise"
	"github.com/blaiseagent/blaise-agent/internal/testsupport"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/blaiseagent/blaise-agent/session"
	"github.com/charmbracelet/log"
)

// unclosableTranscript is a store whose transcript fails to close, as one
// over a connection does when an append failed.
type unclosableTranscript struct{ session.RunStore }

func (s unclosableTranscript) Transcript(id string) (io.WriteCloser, error) {
	w, err := s.RunStore.Transcript(id)
	return failingClose{w}, err
}

type failingClose struct{ io.WriteCloser }

func (f failingClose) Close() error {
	f.WriteCloser.Close()
	return errors.New("store: transcript: disk full")
}

// TestIssue13_TranscriptFailureIsLogged: a session process logs the
// failure of its transcript, which would otherwise reach no one.
func TestIssue13_TranscriptFailureIsLogged(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "blaise.star")
	if err := os.WriteFile(config, []byte(`agent(command = "true")`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := blaise.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewSessionID()
	now := time.Now()
	if err := store.CreateSession(&session.Record{ID: id, State: session.TearingDown, Config: config, Created: now, Updated: now, Runs: 1}); err != nil {
		t.Fatal(err)
	}
	var logs testsupport.Buffer
	sp := &runner.SessionProcess{Store: unclosableTranscript{store}, SessionID: id, Kind: session.TeardownRun, EndReason: session.Completed, Run: 1, Logger: log.New(&logs)}
	if err := sp.Serve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "the transcript is incomplete") || !strings.Contains(got, "disk full") {
		t.Fatalf("the log does not tell of the transcript's failure:\n%s", got)
	}
}
