package plugtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	sdk "github.com/coder/acp-go-sdk"
)

// Timeout bounds each run of a test whose configuration sets no timeout:
// the run is stopped as timed out (L1), and killed if it ignores that for
// TimeoutGrace.
const (
	Timeout      = 2 * time.Minute
	TimeoutGrace = 5 * time.Second
)

// LoadError is a configuration or plug of a test that does not load.
type LoadError struct{ Err error }

func (e *LoadError) Error() string { return e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// Got is what a test produced, by golden section name.
type Got map[string][]byte

// Execute runs the test's runs through the real chain: session processes
// started by the lifecycle engine (as `run` does) with self, the
// blaise-agent executable, which also serves as the scripted agent
// (demo-agent --script). Everything happens in a temporary directory that
// is removed afterwards.
func Execute(ctx context.Context, f *File, self string) (Got, error) {
	work, err := os.MkdirTemp("", "blaisetest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if work, err = filepath.EvalSymlinks(work); err != nil {
		return nil, err
	}
	w := &workDir{root: work, file: f, self: self}
	if err := w.prepare(); err != nil {
		return nil, err
	}
	return w.run(ctx)
}

// workDir is the temporary directory of one test:
//
//	host/    the local host's workspace: the agent's cwd, seeded files
//	state/   the state directory (sessions, persisted state, transcripts)
//	agent/   the scripted agent's script and session store
//	home/, tmp/  HOME and TMPDIR of the session processes
//	config/  the test's own configuration and plugs, if it has them
type workDir struct {
	root   string
	file   *File
	self   string
	config string
	env    []string
	plugs  map[string]bool // plug names of the chain: their log lines count
	// persistedBy names the plug of each id of run1's configuration.
	persistedBy map[string]string
	// timeout of each run: the configuration's, else Timeout.
	timeout time.Duration
	// ids are the test's sessions, in the order they were made: the first,
	// then its forks (those that failed too, whose ids their logs name).
	ids []string
}

func (w *workDir) path(elem ...string) string {
	return filepath.Join(append([]string{w.root}, elem...)...)
}

func (w *workDir) prepare() error {
	for _, d := range []string{"host", "state", "agent", "home", "tmp"} {
		if err := os.Mkdir(w.path(d), 0o755); err != nil {
			return err
		}
	}
	write := func(base string, files map[string][]byte) error {
		for rel, data := range files {
			p := filepath.Join(base, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(w.path("config"), w.file.Inline); err != nil {
		return err
	}
	if err := write(w.path("host"), w.file.Seed); err != nil {
		return err
	}
	w.config = w.file.Config
	if w.config == "" {
		w.config = w.path("config", "blaise.star")
	}
	if first := w.file.Runs[0]; first.Config != "" {
		w.config = w.runConfig(first)
	}
	w.timeout = Timeout
	w.plugs = map[string]bool{}
	w.persistedBy = map[string]string{}
	configs := []string{w.config}
	for _, r := range w.file.Runs[1:] {
		if r.Config != "" {
			configs = append(configs, w.runConfig(r))
		}
	}
	for i, path := range configs {
		loader := chain.NewLoader(log.New(io.Discard))
		loader.Fallback = w.fallback()
		cfg, err := loader.LoadConfig(path)
		if err != nil {
			return &LoadError{w.normalizeErr(err)}
		}
		if i == 0 {
			w.timeout = cmp.Or(cfg.Session.Timeout, Timeout)
			for _, u := range cfg.Uses {
				if u.ID != "" {
					w.persistedBy[u.ID] = u.Plug.Name
				}
			}
			for id := range w.file.Persisted {
				if _, ok := w.persistedBy[id]; !ok {
					return &ErrorAt{w.file.Path, w.file.SectionLine("persisted/" + id), fmt.Sprintf("persisted/%s: the configuration of run1 has no plug with id %q", id, id)}
				}
			}
		}
		for _, u := range cfg.Uses {
			w.plugs[u.Plug.Name] = true
		}
	}
	w.env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.path("home"),
		"TMPDIR=" + w.path("tmp"),
		"LANG=C.UTF-8",
	}, w.file.Env...)
	if v, ok := os.LookupEnv("GORACE"); ok {
		// Race-enabled builds (blaise-agent's own tests) read it at exit.
		w.env = append(w.env, "GORACE="+v)
	}
	if w.file.Setup != nil {
		cmd := exec.Command("sh", "-e", "-c", string(w.file.Setup))
		cmd.Dir, cmd.Env = w.path("host"), w.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return &ErrorAt{w.file.Path, w.file.SectionLine("setup"), fmt.Sprintf("setup: %v\n%s", err, out)}
		}
	}
	return nil
}

// fallback lets the test's own configuration and plugs, written to
// $WORK/config, reach the files beside the test file: a relative path that
// names no file there (none of the test's sections) is relative to the
// test file's directory.
func (w *workDir) fallback() *interp.Fallback {
	return &interp.Fallback{From: w.path("config"), To: w.file.Dir}
}

// runConfig is the path of the configuration that run r names: a .star
// section of the test, else a file relative to the test file.
func (w *workDir) runConfig(r *Run) string {
	if rel := filepath.Clean(r.Config); w.file.Inline[rel] != nil {
		return w.path("config", rel)
	}
	return filepath.Join(w.file.Dir, r.Config)
}

// normalizeErr points a load error in the test's own configuration or
// plugs at the test file: $WORK/config/p.star:3:1 becomes t.blaisetest:12:1.
func (w *workDir) normalizeErr(err error) error {
	dirs := []string{regexp.QuoteMeta(w.path("config") + "/")}
	if wd, err := os.Getwd(); err == nil {
		// Load errors name files relative to the working directory when
		// they are below it.
		if rel, err := filepath.Rel(wd, w.path("config")); err == nil && !strings.HasPrefix(rel, "..") {
			dirs = append(dirs, regexp.QuoteMeta(rel+"/"))
		}
	}
	return errors.New(w.file.atSections(err.Error(), dirs...))
}

// atSections points the places FILE:LINE:COL in s of files under one of
// dirs (regular expressions, each ending in "/") at the sections of f
// that hold them.
func (f *File) atSections(s string, dirs ...string) string {
	re := regexp.MustCompile(`(?:` + strings.Join(dirs, "|") + `)([^:\s]+):(\d+):(\d+)`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		sub := re.FindStringSubmatch(m)
		if f.Inline[sub[1]] == nil {
			return m
		}
		line, _ := strconv.Atoi(sub[2])
		return fmt.Sprintf("%s:%d:%s", f.Path, f.SectionLine(sub[1])+line-1, sub[3])
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Since returns what was written from offset on, and the new offset.
func (s *syncBuffer) Since(off int) ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes()[off:]), s.b.Len()
}

func (w *workDir) run(ctx context.Context) (Got, error) {
	store, err := filestore.OpenStore(w.path("state"))
	if err != nil {
		return nil, err
	}
	logs := &syncBuffer{}
	e := &engine.Engine{
		Store:   store,
		Command: []string{w.self, "session-process"},
		Stderr:  logs,
		LogArgs: []string{"--log-level", "debug", "--log-format", "json"},
		Log:     log.New(io.Discard),
		Agent:   []string{w.self, "demo-agent", "--state-dir", w.path("agent", "state"), "--script", w.path("agent", "script.json")},
		Dir:     w.path("host"),
		Env:     w.env,
		// A run that hangs ends as timed out; the test shows where.
		Settings:     lifecycle.Settings{Timeout: w.timeout},
		TimeoutGrace: TimeoutGrace,
		PlugTime:     PlugTime,
		FallbackFrom: w.fallback().From,
		FallbackTo:   w.fallback().To,
		Created:      func(id string) error { return w.seed(ctx, store, id) },
	}
	got := Got{}
	var rec *lifecycle.Record
	logOff, transcriptOff := 0, int64(0)
	// What the host holds after a run is what the next one starts from.
	before, err := snapshot(w.path("host"))
	if err != nil {
		return nil, err
	}
	for _, r := range w.file.Runs {
		prev := rec
		if rec, err = w.runOne(ctx, e, r, rec, got); err != nil {
			return nil, err
		}
		// The session's run this one started, whose pause it shows: a
		// fork's first run is its run 1; a failed fork, or do lines alone,
		// start none.
		run := 0
		switch {
		case prev == nil || prev.ID != rec.ID:
			run = 1
		case rec.Runs > prev.Runs:
			run = prev.Runs + 1
		}
		if prev != nil && prev.ID != rec.ID {
			transcriptOff = 0 // the fork's transcript
		}
		if !slices.Contains(w.ids, rec.ID) {
			w.ids = append(w.ids, rec.ID)
		}
		prefix := fmt.Sprintf("want/run%d/", r.Number)
		var lines []byte
		lines, logOff = logs.Since(logOff)
		entries := parseLog(lines)
		got[prefix+"log"] = w.renderLog(entries)
		got[prefix+"outputs"] = renderOutputs(entries)
		after, err := snapshot(w.path("host"))
		if err != nil {
			return nil, err
		}
		got[prefix+"host"] = append(renderCommands(entries), diffSnapshots(before, after)...)
		before = after
		if got[prefix+"transcript"], transcriptOff, err = readTranscript(store.TranscriptPath(rec.ID), transcriptOff); err != nil {
			return nil, err
		}
		got[prefix+"pause"], got[prefix+"teardown"] = renderPause(rec, run), renderTeardown(rec)
		if got[prefix+"persisted"], err = renderPersisted(ctx, store, rec.ID); err != nil {
			return nil, err
		}
	}
	norm := w.normalizer(w.ids)
	for k, v := range got {
		if len(v) == 0 {
			delete(got, k)
			continue
		}
		v = timestamp().ReplaceAll([]byte(norm.Replace(string(v))), []byte("$$TIME"))
		for _, m := range w.file.Masks {
			v = m.Re.ReplaceAllLiteral(v, []byte("$"+m.Name))
		}
		if v[len(v)-1] != '\n' {
			v = append(v, '\n') // as a txtar section ends
		}
		got[k] = v
	}
	return got, nil
}

// PlugTime is where the plugs' time.now() starts in a test: run n at
// PlugTime plus n-1 hours, one second more at each reading.
var PlugTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seed stores the persisted state of the test's persisted/ID sections in
// the new session id, as the plug with that id stored it.
func (w *workDir) seed(ctx context.Context, store *filestore.Store, id string) error {
	for plugID, data := range w.file.Persisted {
		if err := store.Persisted().Set(ctx, id, plugID, w.persistedBy[plugID], data); err != nil {
			return &ErrorAt{w.file.Path, w.file.SectionLine("persisted/" + plugID), err.Error()}
		}
	}
	return nil
}

// timestamp matches an RFC 3339 time, as logs write them.
var timestamp = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
})

// normalizer replaces what differs from one machine or one time to the
// next: the work directory, this program's path, the session ids (the
// first $SESSION, its forks $FORK, $FORK2 …), and where the configuration
// and the test file are (a clone elsewhere).
func (w *workDir) normalizer(ids []string) *strings.Replacer {
	type pair struct{ old, new string }
	pairs := []pair{{w.root, "$WORK"}, {w.self, "$BLAISE_AGENT"}}
	if w.file.Config != "" {
		pairs = append(pairs, pair{filepath.Dir(w.file.Config), "$CONFIG"})
	}
	pairs = append(pairs, pair{w.file.Dir, "$TESTDIR"})
	// The longest first, so that a path below another reads as the
	// nearer one ($CONFIG before $TESTDIR when they are the same).
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	var args []string
	for i, id := range ids {
		switch i {
		case 0:
			args = append(args, id, "$SESSION")
		case 1:
			args = append(args, id, "$FORK")
		default:
			args = append(args, id, fmt.Sprintf("$FORK%d", i))
		}
	}
	for _, p := range pairs {
		args = append(args, p.old, p.new)
	}
	return strings.NewReplacer(args...)
}

// runOne runs one run's script: it starts or resumes the session, plays
// the client's actions, stops the run and waits for its end.
func (w *workDir) runOne(ctx context.Context, e *engine.Engine, r *Run, prev *lifecycle.Record, got Got) (*lifecycle.Record, error) {
	errAt := func(format string, args ...any) error {
		return &ErrorAt{w.file.Path, r.Line, fmt.Sprintf("run%d: ", r.Number) + fmt.Sprintf(format, args...)}
	}
	if n := leadingDos(r.Actions); n > 0 {
		if prev == nil || prev.State != lifecycle.Paused {
			return nil, errAt("do runs an action on a paused session: it needs a run before it that paused")
		}
		if err := w.act(ctx, e, prev.ID, r, got); err != nil {
			return nil, err
		}
		if r.Actions = r.Actions[n:]; len(r.Actions) == 0 {
			// Only actions: no run starts, the session stays paused.
			return e.Store.Session(ctx, prev.ID)
		}
	}
	if len(r.Actions) == 1 && r.Actions[0].Verb == "fork" {
		if prev == nil || prev.State != lifecycle.Paused {
			return nil, errAt("fork forks the paused session: it needs a run before it that paused")
		}
		if r.Config != "" {
			return nil, errAt("a fork has the configuration of the session it forks: #config goes in a later run")
		}
		return w.fork(ctx, e, prev.ID, r, got)
	}
	if prev != nil && prev.State != lifecycle.Ended && len(r.Actions) == 1 && r.Actions[0].Verb == "end" {
		// A paused session ended, or a failed teardown tried again: a
		// teardown run, no agent (C8). It ends by itself, or by the
		// engine's timeout.
		return e.End(context.WithoutCancel(ctx), prev.ID)
	}
	if prev != nil && prev.State != lifecycle.Paused {
		return nil, errAt("the session is %s after run%d: there is nothing to run but its teardown (a run whose only action is end)", prev.State, r.Number-1)
	}
	var turns []string
	for _, a := range r.Actions {
		if a.Verb == "prompt" {
			t := a.Turn
			if t == "" {
				t = a.Arg
			}
			turns = append(turns, t)
		}
	}
	script, _ := json.Marshal(turns)
	if err := os.WriteFile(w.path("agent", "script.json"), script, 0o644); err != nil {
		return nil, err
	}
	var live *engine.Live
	var err error
	if r.Config != "" && prev != nil {
		// The plugs changed between runs, as when a configuration is
		// edited while its session is paused.
		config := w.runConfig(r)
		if _, err := e.Store.UpdateSession(ctx, prev.ID, func(rec *lifecycle.Record) error { rec.Config = config; return nil }); err != nil {
			return nil, errAt("%v", err)
		}
	}
	if prev == nil {
		live, err = e.Start(ctx, w.config)
	} else {
		live, err = e.Resume(ctx, prev.ID)
	}
	if err != nil {
		return nil, errAt("%v", err)
	}
	out := &syncBuffer{}
	c := newClient(live, out, w.path("host"))
	defer c.close()
	if err := c.open(ctx, e.Store, prev); err == nil {
		c.play(ctx, r.Actions)
	} else if c.gone(ctx, err) {
		c.Notice("· the run ended before the session opened")
	} else {
		c.Notice("· " + err.Error())
	}
	c.stop(r.Actions)
	// The run ends by itself, or by the engine's timeout: wait for it, so
	// that no process outlives the test.
	rec, err := live.Wait(context.Background())
	if err != nil {
		return nil, errAt("waiting for the run to end: %v", err)
	}
	got[fmt.Sprintf("want/run%d/client", r.Number)], _ = out.Since(0)
	return rec, nil
}

// testClient is the client of a test: the terminal client of `run`, its
// rendering kept, its permission answers scripted.
type testClient struct {
	*client.Terminal
	live    *engine.Live
	conn    *client.Conn
	cancel  context.CancelFunc
	updates chan struct{} // a session/update arrived
	acp     string        // the ACP session id
}

func newClient(live *engine.Live, out io.Writer, root string) *testClient {
	c := &testClient{
		Terminal: &client.Terminal{Out: out, Err: out, Root: root, Default: "allow"},
		live:     live,
		updates:  make(chan struct{}, 1),
	}
	r, wr := live.Stream()
	c.conn = client.NewConn(r, wr, c)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = func() { cancel(); r.Close() }
	// Ends with ctx, cancelled by close.
	go func() { _ = c.conn.Run(ctx) }()
	return c
}

func (c *testClient) close() { c.cancel() }

// Notification renders the update and notes that one arrived.
func (c *testClient) Notification(method string, params json.RawMessage) {
	c.Terminal.Notification(method, params)
	select {
	case c.updates <- struct{}{}:
	default:
	}
}

// open initializes the connection and opens the ACP session: a new one in
// the first run, the stored one loaded again after.
func (c *testClient) open(ctx context.Context, store lifecycle.Store, prev *lifecycle.Record) error {
	var load string
	if prev != nil {
		rec, err := store.Session(ctx, prev.ID)
		if err != nil {
			return err
		}
		load = rec.ACPSessionID
	}
	var err error
	if c.acp, err = c.conn.Open(ctx, c.Capabilities(), c.Root, load); err != nil {
		return err
	}
	if load != "" {
		c.EndTurn("end_turn")
	}
	return nil
}

// play runs the client's actions until a stop, or until the run ends.
func (c *testClient) play(ctx context.Context, actions []Action) {
	for i, a := range actions {
		switch a.Verb {
		case "answer":
			// The terminal asks no one: "" cancels every request.
			c.Default = map[string]string{"allow": "allow", "deny": "deny", "cancel": ""}[a.Arg]
		case "prompt":
			cancelled := i+1 < len(actions) && actions[i+1].Verb == "cancel"
			if !c.prompt(ctx, a.Arg, cancelled) {
				return
			}
			if a.Crashes() {
				// The run ends by itself; a stop now would race with the
				// runner noticing the crash.
				<-c.live.Done()
				return
			}
		}
	}
}

// prompt sends a prompt and waits for its answer; with cancel, it cancels
// the turn once the agent sent its first update. It reports whether the
// run goes on.
func (c *testClient) prompt(ctx context.Context, text string, cancel bool) bool {
	select {
	case <-c.updates:
	default:
	}
	c.Notice("> " + text)
	type result struct {
		stopReason string
		err        error
	}
	done := make(chan result, 1)
	// Ends with the prompt's answer, or with the connection's end (close).
	go func() {
		stop, err := c.conn.Prompt(ctx, c.acp, text)
		done <- result{stop, err}
	}()
	if cancel {
		select {
		case <-c.updates:
			_ = c.conn.Cancel(c.acp)
			c.CancelPrompts()
		case r := <-done:
			done <- r
		}
	}
	r := <-done
	if r.err != nil {
		if c.gone(ctx, r.err) {
			c.Notice("· the run ended before the prompt was answered")
			return false
		}
		c.Notice("· the prompt failed: " + r.err.Error())
		return true
	}
	if cancel && r.stopReason != string(sdk.StopReasonCancelled) {
		// Said where the test's author looks: a turn with no update
		// before its wait is not cancelled, only waited for.
		c.Notice("· cancel: the turn ended (" + r.stopReason + ") before it was cancelled")
	}
	c.EndTurn(r.stopReason)
	return true
}

// gone reports whether err is the run going away rather than an answer:
// any error but a JSON-RPC error means the run's input or output closed,
// and then it waits for the run to end, so that what follows does not
// depend on how far the run got.
func (c *testClient) gone(ctx context.Context, err error) bool {
	var answer *client.RPCError
	if errors.As(err, &answer) {
		return false
	}
	if ctx.Err() == nil {
		<-c.live.Done()
	}
	return true
}

// stop ends the run as the script says: a stop directive, or at the end
// of the script a stop as idle under the session's policy, as `run` does.
// A stop that cannot be sent finds the run ending by itself (its pause
// says why); one that is lost shows as the test's timeout.
func (c *testClient) stop(actions []Action) {
	select {
	case <-c.live.Done():
		return
	default:
	}
	last := Action{}
	if len(actions) > 0 {
		last = actions[len(actions)-1]
	}
	switch last.Verb {
	case "stop":
		reason, rest, _ := strings.Cut(last.Arg, " ")
		_ = c.live.Stop(lifecycle.Stop{Reason: lifecycle.Reason(reason), MayResume: rest == "may_resume"})
	case "end":
		_ = c.live.Stop(lifecycle.Stop{Reason: lifecycle.Closed})
	default:
		_ = c.live.StopIdle()
	}
}
