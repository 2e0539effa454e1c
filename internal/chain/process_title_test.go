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
	p := serveProcess(t, &chain.SessionProcess{Store: store, SessionID: id, Redactions: &redact.Registry{}})
	sid := p.c.Open(dir)
	for i, prompt := range prompts {
		p.c.Turn(10+i, sid, prompt)
	}
	p.stop(t)
	if err := p.end(); err != nil {
		t.Fatalf("serve: %v\n%s", err, p.logs.String())
	}
	return p.logs.String()
}

// served is a start run's session process serving, with an ACP client on
// its stdio and its control channel at hand.
type served struct {
	c          *acptest.Client
	logs       *testsupport.Buffer
	ctlW, inW  *io.PipeWriter
	serveEnded chan error
}

// serveProcess serves sp, a start run's session process (its Kind, Run,
// streams, control and logger set here), on pipes.
func serveProcess(t *testing.T, sp *chain.SessionProcess) *served {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctlR, ctlW := io.Pipe()
	p := &served{logs: new(testsupport.Buffer), ctlW: ctlW, inW: inW, serveEnded: make(chan error, 1)}
	sp.Kind, sp.Run = lifecycle.StartRun, 1
	sp.ACPIn, sp.ACPOut, sp.Control, sp.Logger = inR, outW, engine.NewControlConn(ctlR, io.Discard), log.New(p.logs)
	go func() {
		p.serveEnded <- sp.Serve(context.Background())
		outW.Close()
	}()
	p.c = &acptest.Client{
		T:       t,
		In:      acptest.Read(outR, func(err error) { t.Errorf("client read: %v", err) }),
		Out:     acptest.WriteLines(inW),
		Timeout: testsupport.Patience,
		Logs:    p.logs.String,
	}
	return p
}

// stop sends the run a stop as idle, which may resume.
func (p *served) stop(t *testing.T) {
	t.Helper()
	stop := engine.NewControlConn(nil, p.ctlW)
	if err := stop.Send(lifecycle.Control{Kind: lifecycle.ControlStop, Stop: &lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true}}); err != nil {
		t.Fatal(err)
	}
}

// end closes the control channel and the client's input, reads what is
// left, and returns what Serve returned.
func (p *served) end() error {
	p.ctlW.Close()
	p.inW.Close()
	p.c.Drain()
	return <-p.serveEnded
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
