package chain_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// unclosableTranscript is a store whose transcript fails to close, as one
// over a connection does when an append failed.
type unclosableTranscript struct{ lifecycle.RunStore }

func (s unclosableTranscript) Transcript(ctx context.Context, id string) (io.WriteCloser, error) {
	w, err := s.RunStore.Transcript(ctx, id)
	return failingClose{w}, err
}

type failingClose struct{ io.WriteCloser }

func (f failingClose) Close() error {
	f.WriteCloser.Close()
	return errors.New("store: transcript: disk full")
}

// newProcessSession creates a session of the chain of files, in state, in
// a store beside it.
func newProcessSession(t *testing.T, files map[string]string, state lifecycle.State) (*filestore.Store, string, string) {
	t.Helper()
	dir := newChain(t, files).dir
	store, err := filestore.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewSessionID()
	now := time.Now()
	if err := store.CreateSession(t.Context(), &lifecycle.Record{ID: id, State: state, Config: filepath.Join(dir, "blaise.star"), Created: now, Updated: now, Runs: 1}); err != nil {
		t.Fatal(err)
	}
	return store, id, dir
}

// TestTranscriptFailureIsLogged: a session process logs the
// failure of its transcript, which would otherwise reach no one.
func TestTranscriptFailureIsLogged(t *testing.T) {
	store, id, _ := newProcessSession(t, map[string]string{"blaise.star": `agent(command = "true")` + "\n"}, lifecycle.TearingDown)
	var logs testsupport.Buffer
	sp := &chain.SessionProcess{Store: unclosableTranscript{store}, SessionID: id, Kind: lifecycle.TeardownRun, EndReason: lifecycle.Completed, Run: 1, Logger: log.New(&logs)}
	if err := sp.Serve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "the transcript is incomplete") || !strings.Contains(got, "disk full") {
		t.Fatalf("the log does not tell of the transcript's failure:\n%s", got)
	}
}

// transcriptAtPause is a store that sends the transcript as it is when
// the pause is reported.
type transcriptAtPause struct {
	*filestore.Store
	atPause chan string
}

func (s transcriptAtPause) Paused(ctx context.Context, id string, p lifecycle.PauseRecord) (*lifecycle.Record, error) {
	r, err := s.ReadTranscript(ctx, id)
	if err != nil {
		return nil, err
	}
	got, _ := io.ReadAll(r)
	r.Close()
	s.atPause <- string(got)
	return s.Store.Paused(ctx, id, p)
}

// lateAgent answers initialize and session/new, then sends an update
// outside any turn and waits: no response follows the update to carry it
// into the transcript.
const lateAgent = `agent(command = "sh", args = ["-c", """
read l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
read l; echo '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late words"}}}}'
exec cat >/dev/null
"""])
`

// TestL7_NotificationsBeforeAPauseAreRecordedFirst: the
// notifications gathered when a stop comes are in the transcript before
// the pause is reported, as every line before a report is (L7).
func TestL7_NotificationsBeforeAPauseAreRecordedFirst(t *testing.T) {
	store, id, dir := newProcessSession(t, map[string]string{"blaise.star": lateAgent}, lifecycle.Active)
	atPause := make(chan string, 1)
	p := serveProcess(t, &chain.SessionProcess{Store: transcriptAtPause{store, atPause}, SessionID: id})
	p.c.Open(dir)
	p.c.Until(func(m *acp.Message) bool { return strings.Contains(string(m.Params), "late words") })
	p.stop(t)
	var transcript string
	select {
	case transcript = <-atPause:
	case <-time.After(testsupport.Patience):
		t.Fatalf("no pause was reported:\n%s", p.logs.String())
	}
	_ = p.end()
	if !strings.Contains(transcript, "late words") {
		t.Fatalf("the update before the pause is not in the transcript when the pause is reported:\n%s", transcript)
	}
}

// TestL7_APauseCarriesTheAgentsSessionItsRunOpened: the pause a run
// reports names the agent's session it opened, which a resume loads: a
// session whose front end went before it had recorded that session (here,
// a client that is no front end at all) can still be loaded again.
func TestL7_APauseCarriesTheAgentsSessionItsRunOpened(t *testing.T) {
	store, id, dir := newProcessSession(t, map[string]string{"blaise.star": lateAgent}, lifecycle.Active)
	p := serveProcess(t, &chain.SessionProcess{Store: store, SessionID: id})
	p.c.Open(dir)
	p.stop(t)
	if err := p.end(); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pause == nil || rec.Pause.ACPSessionID != "s1" || rec.ACPSessionID != "s1" {
		t.Fatalf("after the pause: the session's agent session %q, its pause %+v; want s1", rec.ACPSessionID, rec.Pause)
	}
}
