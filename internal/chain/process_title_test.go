package chain_test

import (
	"context"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/internal/testkit/acptest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
)

// secretValue is the secret the plug of secretChain registers.
const secretValue = "s3cr3t-t0ken-4242"

// secretChain runs the demo agent behind a plug that registers a secret
// (as blaise:secrets does) and logs a line with it.
func secretChain() map[string]string {
	return map[string]string{
		"blaise.star": demoAgent("demo") + `setup(use("./keeper.star"))` + "\n",
		"keeper.star": `plug(name = "keeper")
def on_session(ctx, next):
    redact.secrets({"tok": "` + secretValue + `"})
    ctx.log.info("token is", "` + secretValue + `", kind = "` + secretValue + `")
    next()
`,
	}
}

// serveTurns runs a start run of session id in store, where a client
// sends prompts, one turn each, then stops it.
func serveTurns(t *testing.T, store *filestore.Store, id, dir string, prompts ...string) string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctlR, ctlW := io.Pipe()
	var logs testsupport.Buffer
	sp := &chain.SessionProcess{
		Store: store, SessionID: id, Kind: lifecycle.StartRun, Run: 1, Redactions: &redact.Registry{},
		ACPIn: inR, ACPOut: outW, Control: engine.NewControlConn(ctlR, io.Discard), Logger: log.New(&logs),
	}
	served := make(chan error, 1)
	go func() {
		served <- sp.Serve(context.Background())
		outW.Close()
	}()
	c := &acptest.Client{
		T:       t,
		In:      acptest.Read(outR, func(err error) { t.Errorf("client read: %v", err) }),
		Out:     acptest.WriteLines(inW),
		Timeout: testsupport.Patience,
		Logs:    logs.String,
	}
	sid := c.Open(dir)
	for i, p := range prompts {
		c.Turn(10+i, sid, p)
	}
	stop := engine.NewControlConn(nil, ctlW)
	if err := stop.Send(lifecycle.Control{Kind: lifecycle.ControlStop, Stop: &lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}}); err != nil {
		t.Fatal(err)
	}
	ctlW.Close()
	inW.Close()
	c.Drain()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v\n%s", err, logs.String())
	}
	return logs.String()
}

// TestSessionProcessRecordsTheRedactedTitle: the first line of the first
// prompt names the session in its record, with the secret a plug
// registered redacted (blaise:secrets); a later prompt keeps it.
func TestSessionProcessRecordsTheRedactedTitle(t *testing.T) {
	store, id, dir := newProcessSession(t, secretChain(), lifecycle.Active)
	serveTurns(t, store, id, dir, "deploy with "+secretValue+" now\nand more", "a second prompt")
	rec, err := store.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Title != "deploy with [REDACTED:tok] now" {
		t.Fatalf("title %q", rec.Title)
	}
}

// TestPlugLogLinesAreStoredPerRunRedacted: what a plug logs with ctx.log
// is kept in the store with its run, plug, level and attributes, the
// secret it registered redacted (blaise:secrets).
func TestPlugLogLinesAreStoredPerRunRedacted(t *testing.T) {
	store, id, dir := newProcessSession(t, secretChain(), lifecycle.Active)
	serveTurns(t, store, id, dir, "hello")
	lines, err := store.PlugLog(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := []lifecycle.PlugLogLine{{Run: 1, Seq: 1, Level: "info", Plug: "keeper", Msg: "token is [REDACTED:tok]", Attrs: []string{"kind", "[REDACTED:tok]"}}}
	if len(lines) == 1 {
		lines[0].Time = time.Time{}
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("plug log %+v, want %+v", lines, want)
	}
}
