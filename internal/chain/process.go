package chain

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
)

// SessionProcess is one run of a session, in a process of its own (C13):
// the chain and its agent, with ACP on ACPIn/ACPOut and the front end on
// Control. It records its reports in the store itself, so that a front end
// that dies loses nothing; its first report, once the plugs are loaded,
// carries what only the configuration knows (L7).
type SessionProcess struct {
	Store     lifecycle.RunStore
	SessionID string
	Kind      lifecycle.Kind
	Run       int              // the run's number
	EndReason lifecycle.Reason // for teardown runs
	ACPIn     io.Reader
	ACPOut    io.Writer
	Control   *engine.ControlConn // nil: no front end
	Logger    *log.Logger
	// Redactions receives the secrets the plugs register; the transcript,
	// the reports and the error of the run are redacted with them, and
	// Logger should write through Redactions.Writer. Nil: none.
	Redactions *redact.Registry
	MaxLine    int
	// Agent, when set, replaces the command and arguments of the
	// configuration's agent.
	Agent []string
	// StopGrace: Options.StopGrace.
	StopGrace time.Duration
	// Config, when set, is the configuration to load instead of the
	// record's: a runner's own blaise.star.
	Config string
	// Carry sends the messages toward the client in the records of the
	// transcript, not on ACPOut: a session process of a runner of protocol
	// version 4, whose server takes them out of the records.
	Carry bool
	// Bundled: the front end takes the agent's session/update notifications
	// in bundles, with its session id (Client.Bundled).
	Bundled bool
	// PlugTime, when not zero, makes time.now() of the plugs a clock of
	// blaise-agent test: run n starts at PlugTime plus n-1 hours, and each
	// reading is one second after the one before, the same every time.
	// The names of host.fs.mkdtemp count then too (Options.CountTempNames).
	PlugTime time.Time
	// Fallback, when set, is where files below Fallback.From find the
	// files they reference that are missing there (interp.Loader.Fallback):
	// the plugs beside a test file.
	Fallback *interp.Fallback

	// Action and ActionArgs are the action of an action run and its
	// arguments (ActionCall); its output goes to ACPOut.
	Action     string
	ActionArgs json.RawMessage
}

// steppingClock starts at start and moves one second at each reading.
func steppingClock(start time.Time) func() time.Time {
	var mu sync.Mutex
	next := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := next
		next = next.Add(time.Second)
		return now
	}
}

// Serve runs the run to its end.
func (sp *SessionProcess) Serve(ctx context.Context) error {
	if sp.Logger == nil {
		sp.Logger = log.Default()
	}
	logger := sp.Logger
	// The store's calls go on once ctx ended (a SIGTERM): the run's last
	// reports say how it ended.
	sctx := context.WithoutCancel(ctx)
	rec, err := sp.Store.Session(sctx, sp.SessionID)
	if err != nil {
		return err
	}
	if sp.Config != "" {
		rec.Config = sp.Config
	}
	loader := NewLoader(logger)
	loader.Fallback = sp.Fallback
	cfg, err := loader.LoadConfig(rec.Config)
	if sp.Kind == lifecycle.ActionRun {
		return sp.serveAction(ctx, rec, cfg, err)
	}
	if err != nil {
		return sp.broken(sctx, rec, err)
	}
	if len(sp.Agent) > 0 {
		cfg.Agent.Command, cfg.Agent.Args = sp.Agent[0], sp.Agent[1:]
	}
	loaded, err := sp.loaded(sctx, rec, cfg)
	if err != nil {
		return sp.broken(sctx, rec, err)
	}
	if err := sp.Store.Loaded(sctx, sp.SessionID, loaded); err != nil {
		return err
	}
	for _, id := range loaded.OrphanedState {
		// Named by the plug that stored it, so a person knows what to clean.
		name, _, _ := sp.Store.PersistedPlug(sctx, sp.SessionID, id)
		logger.Warn("stored plug state belongs to no plug of the configuration", "session", sp.SessionID, "plug_id", id, "stored_by", name)
	}
	sp.send(lifecycle.Control{Kind: lifecycle.ControlLoaded, Run: sp.Run, Loaded: &loaded})
	rec.Resumable, rec.Settings = loaded.Resumable, loaded.Settings // what a lost front end's stop is based on (L9)

	transcript, carrier, err := sp.transcript(sctx)
	if err != nil {
		return err
	}
	// The recorder stops at a failed write: this log line is where a
	// person learns that the transcript misses lines.
	incomplete := func(err error) {
		if err != nil {
			logger.Error("the transcript is incomplete", "session", sp.SessionID, "run", sp.Run, "err", err)
		}
	}
	defer func() { incomplete(transcript.Close()) }()
	// The title and the plug log go to the store off the message flow and
	// the plugs' calls; what is left is stored before the run ends.
	rctx, stopReports := context.WithCancel(sctx)
	var reporting sync.WaitGroup
	defer reporting.Wait()
	defer stopReports()
	acpSession := newOpened(transcript)
	titles := newTitler(acpSession, rec.Title != "", sp.Redactions.String)
	reporting.Go(func() { titles.run(rctx, sp.titled(sctx, logger)) })
	var plugLog *PlugLog
	if logs, ok := sp.Store.(plugLogStore); ok {
		plugLog = NewPlugLog(sp.Run, sp.Redactions.String)
		reporting.Go(func() {
			plugLog.Run(rctx, func(lines []lifecycle.PlugLogLine) error { return logs.AppendPlugLog(sctx, sp.SessionID, lines) },
				func(err error) {
					logger.Warn("the plugs' log lines are not stored", "session", sp.SessionID, "err", err)
				})
		})
	}
	opts := Options{
		Config:       cfg,
		SessionID:    sp.SessionID,
		ExecutionID:  fmt.Sprintf("%s.%d", sp.SessionID, sp.Run),
		Kind:         sp.Kind,
		Number:       sp.Run,
		EndReason:    sp.EndReason,
		ForkedFrom:   rec.ForkedFrom,
		Store:        sp.Store.Persisted(),
		Logger:       logger,
		IdlePolicy:   rec.Settings.IdlePolicy,
		StartupLimit: rec.Settings.StartupLimit,
		Recorder:     titles,
		PlugLog:      plugLog,
		Carrier:      carrier,
		Redactions:   sp.Redactions,
		MaxLine:      sp.MaxLine,
		StopGrace:    sp.StopGrace,
		OnPause: func(p builtins.PauseInfo) error {
			// The notifications of a turn the pause cut are in the
			// transcript before the pause is: a report follows its lines.
			incomplete(transcript.Flush())
			return sp.report(sctx, p.Pause, acpSession.latest())
		},
		OnAttach: func(plug string) {
			sp.send(lifecycle.Control{Kind: lifecycle.ControlAttaching, Run: sp.Run, Plug: plug})
		},
	}
	if sp.Kind == lifecycle.TeardownRun && sp.EndReason == lifecycle.Failed && rec.Pause != nil && rec.Pause.Error != "" {
		// A teardown after a failure, in a run of its own: the pause's error.
		opts.EndError = errors.New(rec.Pause.Error)
	}
	if sp.Kind != lifecycle.TeardownRun {
		opts.Client = &Client{In: sp.ACPIn, Out: sp.ACPOut, Bundled: sp.Bundled && !sp.Carry}
	}
	if !sp.PlugTime.IsZero() {
		opts.PlugClock = steppingClock(sp.PlugTime.Add(time.Duration(sp.Run-1) * time.Hour))
		opts.CountTempNames = true
	}
	r := New(opts)
	// Ends with the control stream, closed as the process exits.
	go sp.listen(r, rec)
	res := r.Execute(ctx)

	if res.Teardown == nil {
		return res.ReportErr
	}
	return errors.Join(res.ReportErr, sp.tornDown(sctx, res.Teardown.Reason, res.TeardownErr))
}

// titled returns what records the titles a run takes: in the store, off
// the message flow. A store that cannot (an older server) is told of once.
func (sp *SessionProcess) titled(ctx context.Context, logger *log.Logger) func(string) {
	warned := false
	return func(title string) {
		if err := sp.Store.Titled(ctx, sp.SessionID, title); err != nil && !warned {
			warned = true
			logger.Warn("the session's title is not recorded", "session", sp.SessionID, "err", err)
		}
	}
}

// plugLogStore is a store that keeps plug logs: the file and SQL stores
// (lifecycle.PlugLogs), and one over a runner's connection, which only
// appends.
type plugLogStore interface {
	AppendPlugLog(ctx context.Context, session string, lines []lifecycle.PlugLogLine) error
}

// recorder is where a run's records go: a transcript, or a Carrier.
type recorder interface {
	acp.Recorder
	Flush() error
	Close() error
}

// carryingStore is a store whose transcript can carry the run's messages
// toward the client (runstore.Client).
type carryingStore interface {
	CarriedTranscript(ctx context.Context, id string) (io.WriteCloser, error)
}

// transcript opens the run's transcript; with Carry, the Carrier whose
// records carry the messages toward the client, which is then the
// recorder. The records are redacted with the run's secrets.
func (sp *SessionProcess) transcript(ctx context.Context) (recorder, *acp.Carrier, error) {
	if !sp.Carry {
		w, err := sp.Store.Transcript(ctx, sp.SessionID)
		if err != nil {
			return nil, nil, err
		}
		return acp.NewJSONLRecorder(sp.Redactions.Writer(w)), nil, nil
	}
	cs, ok := sp.Store.(carryingStore)
	if !ok {
		return nil, nil, fmt.Errorf("session %s: its store (%T) cannot carry messages in the transcript", sp.SessionID, sp.Store)
	}
	w, err := cs.CarriedTranscript(ctx, sp.SessionID)
	if err != nil {
		return nil, nil, err
	}
	c := acp.NewCarrier(w, func(b []byte) []byte { return sp.Redactions.Redactor().Bytes(b) })
	return c, c, nil
}

// loaded is the run's first report: whether the chain can resume, the
// settings in force (on a start run, the front end's over the
// configuration's session(...)), and the orphaned plug state.
func (sp *SessionProcess) loaded(ctx context.Context, rec *lifecycle.Record, cfg *interp.Config) (lifecycle.Loaded, error) {
	l := lifecycle.Loaded{Resumable: cfg.Resumable(), Settings: rec.Settings}
	if sp.Kind == lifecycle.StartRun {
		c := cfg.Session
		file := lifecycle.Settings{IdlePolicy: lifecycle.IdlePolicy(c.IdlePolicy), PausedLifetime: c.PausedLifetime, InactivityLimit: c.InactivityLimit, Timeout: c.Timeout}
		settings, err := lifecycle.NormalizeSettings(rec.Asked.Over(file))
		if err != nil {
			return l, fmt.Errorf("%s: session(...): %w", rec.Config, err)
		}
		l.Settings = settings
	}
	var err error
	l.OrphanedState, err = sp.orphans(ctx, cfg.Uses)
	return l, err
}

// broken reports a run that breaks before its plugs are loaded (L7): a
// teardown run failed; a resume run pauses as failed; a start run ends at
// once, for no plug of it ran.
func (sp *SessionProcess) broken(ctx context.Context, rec *lifecycle.Record, err error) error {
	switch sp.Kind {
	case lifecycle.TeardownRun:
		return errors.Join(err, sp.tornDown(ctx, "", err))
	case lifecycle.StartRun:
		return errors.Join(err, sp.report(ctx, lifecycle.Pause{Reason: lifecycle.Failed, Err: err}, ""), sp.tornDown(ctx, lifecycle.Failed, nil))
	}
	_ = sp.report(ctx, lifecycle.Pause{Reason: lifecycle.Failed, MayResume: rec.Settings.IdlePolicy.MayResume(lifecycle.Failed, rec.Resumable, nil), Err: err}, "")
	return err
}

// tornDown records a teardown's outcome and tells the front end (L2).
func (sp *SessionProcess) tornDown(ctx context.Context, reason lifecycle.Reason, failure error) error {
	failure = sp.Redactions.Error(failure)
	_, err := sp.Store.TornDown(ctx, sp.SessionID, failure, time.Now())
	td := &lifecycle.TeardownReport{Reason: reason}
	if failure != nil {
		td.Error = failure.Error()
	}
	sp.send(lifecycle.Control{Kind: lifecycle.ControlTeardown, Run: sp.Run, Teardown: td})
	return err
}

// report records a pause and tells the front end.
func (sp *SessionProcess) report(ctx context.Context, p lifecycle.Pause, acpSession string) error {
	rec := p.Record(sp.Run, time.Now())
	rec.Error = sp.Redactions.String(rec.Error)
	rec.ACPSessionID = acpSession
	_, err := sp.Store.Paused(ctx, sp.SessionID, rec)
	sp.send(lifecycle.Control{Kind: lifecycle.ControlPause, Run: sp.Run, Pause: &rec})
	return err
}

func (sp *SessionProcess) send(c lifecycle.Control) {
	if sp.Control != nil {
		if err := sp.Control.Send(c); err != nil {
			sp.Logger.Debug("the front end is gone", "err", err)
		}
	}
}

// listen passes stop directives to the run. When the front end goes away,
// the session stops as idle under its policy (L9).
func (sp *SessionProcess) listen(r *Run, rec *lifecycle.Record) {
	if sp.Control == nil {
		return
	}
	for {
		c, err := sp.Control.Receive()
		if err != nil {
			r.Stop(rec.Settings.IdlePolicy.IdleStop(rec.Resumable))
			return
		}
		if c.Kind == lifecycle.ControlStop && c.Stop != nil {
			r.Stop(*c.Stop)
		}
	}
}

// orphans lists the stored plug ids that no plug of the chain has (L7).
func (sp *SessionProcess) orphans(ctx context.Context, uses []*interp.Use) ([]string, error) {
	stored, err := sp.Store.PersistedIDs(ctx, sp.SessionID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range stored {
		if !slices.ContainsFunc(uses, func(u *interp.Use) bool { return u.ID == id && u.Plug.Persisted != nil }) {
			out = append(out, id)
		}
	}
	return out, nil
}

// storeConn is the run's store connection: file descriptor fd, or, with
// server, connections to it with the ticket read from fd.
func storeConn(sp *SessionProcess, fd int, server string) (io.ReadWriter, error) {
	f := os.NewFile(uintptr(fd), "store")
	if server == "" {
		defer f.Close()
		// A socket as a net.Conn takes a call and its data in one writev.
		conn, err := net.FileConn(f)
		if err != nil {
			return nil, fmt.Errorf("the store's connection (file descriptor %d): %w", fd, err)
		}
		return conn, nil
	}
	// The runner writes the ticket, a line, and holds the pipe open while
	// it has the run: its end (the runner gone, or the run given up) ends
	// the store, as the end of the runner's store stream did.
	lifeline := bufio.NewReader(f)
	ticket, err := lifeline.ReadString('\n')
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the run's ticket (file descriptor %d): %w", fd, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := runstore.Redial(ctx, func(ctx context.Context) (net.Conn, error) {
		return runstore.DialStore(ctx, server, sp.SessionID, sp.Run, strings.TrimSpace(ticket))
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the run's store at %s: %w", server, err)
	}
	// Ends with the runner's end of the pipe, at the latest with the process.
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		f.Close()
		conn.Close()
	}()
	return conn, nil
}

// ServeInherited serves the run of a session process started by a front
// end (engine.Engine) or a runner: the control channel is file descriptor
// 3. With storeFD 0, the store is the file store in stateDir and the
// session's run lock RunLockFD, held until the process exits; otherwise the
// run's store is served on file descriptor storeFD (runstore), or, with
// storeServer, on connections of its own to that server, with the ticket
// read from storeFD (runner protocol 7). Store, ACP and Control are set
// here.
func ServeInherited(sp *SessionProcess, stateDir string, storeFD int, storeServer string) error {
	collectLessOften()
	// The control channel, the run lock and the store are the front end's
	// and ours: the agent and the plugs' processes must not inherit them.
	syscall.CloseOnExec(3)
	if storeFD > 0 {
		syscall.CloseOnExec(storeFD)
		conn, err := storeConn(sp, storeFD, storeServer)
		if err != nil {
			return err
		}
		sp.Store = runstore.NewClient(conn)
	} else {
		store, err := filestore.OpenStore(stateDir)
		if err != nil {
			return err
		}
		syscall.CloseOnExec(engine.RunLockFD)
		sp.Store = store
	}
	ctl := os.NewFile(3, "control")
	// Interrupts are the front end's to handle; SIGTERM shuts the session down.
	signal.Ignore(os.Interrupt)
	// Our log may go to a pipe of a front end that left (run passes it to
	// the terminal): its lines are lost then, and the run goes on.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	sp.ACPIn, sp.ACPOut, sp.Control = os.Stdin, os.Stdout, engine.NewControlConn(ctl, ctl)
	return sp.Redactions.Error(sp.Serve(ctx))
}

// sessionGCPercent is the session process's GOGC, unless $GOGC sets one.
// A stream through plugs allocates for every message (the handlers'
// Starlark frames, and fresh blocks for the messages a handler may have
// kept, left to the collector) over a live heap of a few MB: at the
// default of 100 the collector ran every few milliseconds, and its work
// took about a tenth of the session process's CPU time
// (BenchmarkACPFrontEnd, acp-5plugs; 12% of its CPU time a message and of
// the rate with 5 plugs, on an idle machine). At rest it holds no more
// than at 100 (docs/performance.md, GOGC and a memory limit, and what each
// optimisation pays).
const sessionGCPercent = 400

// collectLessOften sets the session process's GOGC to sessionGCPercent.
func collectLessOften() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(sessionGCPercent)
	}
}
