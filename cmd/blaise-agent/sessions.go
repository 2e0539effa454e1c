package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// SessionsCmd is `blaise-agent sessions`.
type SessionsCmd struct {
	List    SessionsListCmd    `cmd:"" default:"withargs" help:"List sessions with their state and age."`
	Show    SessionsShowCmd    `cmd:"" help:"Show a session: where it was created, its state, settings, each of its runs with its stop, pause and teardown, expiry, stored and orphaned state."`
	Log     SessionsLogCmd     `cmd:"" help:"Show a session's transcript as run shows a session: prompts, answers, tool calls, permission decisions and the plugs that answered."`
	Prune   SessionsPruneCmd   `cmd:"" help:"Remove the records (and transcripts) of ended sessions; never a live, paused or unsettled one."`
	End     SessionsEndCmd     `cmd:"" help:"End a paused session now: its plugs tear down (reason closed)."`
	Sweep   SessionsSweepCmd   `cmd:"" help:"Tear down expired sessions, retry due teardowns, and settle runs whose process died."`
	Resolve SessionsResolveCmd `cmd:"" help:"Mark an orphaned session ended once you cleaned up what its plugs left behind."`
	Title   SessionsTitleCmd   `cmd:"" help:"Set a session's title (one line, at most 200 characters); titles derived later from its prompts no longer replace it."`

	// Actions (sessions_actions.go).
	Do       SessionsDoCmd       `cmd:"" help:"Do an action a plug offers on a paused session's environment (diff, merge …), without its agent; sessions show lists them."`
	Diff     SessionsDiffCmd     `cmd:"" help:"The session's changes against its base (the action diff of blaise:worktree)."`
	Merge    SessionsMergeCmd    `cmd:"" help:"Merge the session's branch into the branch it came from (the action merge of blaise:worktree)."`
	Checkout SessionsCheckoutCmd `cmd:"" help:"Print the session's worktree path, or open a shell there (the action checkout of blaise:worktree)."`

	// Forks (sessions_fork.go).
	Fork SessionsForkCmd `cmd:"" help:"Start a new session from a paused one's environment as it is now (its plugs copy what they choose, its conversation forked where the agent can); prints the new session's id."`
}

// dir is the state directory the flags name, else the default one.
func (f *StateFlags) dir() string {
	if f.StateDir != "" {
		return f.StateDir
	}
	return filestore.DefaultStateDir()
}

// existingEngine is the engine of the sessions commands, which read and
// settle sessions but never create a state directory: it is nil, with no
// error, when there is none.
func (f *StateFlags) existingEngine(g *Globals) (*engine.Engine, error) {
	ok, err := filestore.StoreExists(f.dir())
	if err != nil || !ok {
		return nil, err
	}
	return f.engine(g)
}

// noSession is the error of a command about one session when there is no
// state directory.
func (f *StateFlags) noSession(id string) error {
	return fmt.Errorf("session %s: %w (there is no state directory %s)", id, lifecycle.ErrNotFound, f.dir())
}

// SessionsListCmd lists sessions.
type SessionsListCmd struct {
	StateFlags
	ServerFlags
	Agent string `help:"With --server: only the sessions of this agent." placeholder:"NAME"`
	State string `help:"With --server: only the sessions in this state (active, paused, tearing_down, ended, orphaned)." placeholder:"STATE"`
	Limit int    `help:"With --server: list this many sessions, newest first (the server's default: 100; at most 1000)." placeholder:"N"`
	// Cursor continues a list that had more sessions than Limit.
	Cursor string `help:"With --server: the page after the one that printed this cursor." placeholder:"CURSOR"`
	All    bool   `help:"Include ended sessions; with --server, every page of the list."`
	JSON   bool   `name:"json" help:"Print the sessions' records as a JSON array, for scripts."`
}

// Run prints the table, then what to do about orphaned sessions. Records
// that cannot be read are named in its error, after the listing of the
// others.
func (c *SessionsListCmd) Run(g *Globals) error {
	if c.Server != "" {
		return c.fromServer()
	}
	if c.State != "" || c.Limit != 0 || c.Cursor != "" {
		return errors.New("--state, --limit and --cursor page a server's list (--server URL); this machine's sessions are listed whole")
	}
	e, err := c.existingEngine(g)
	if err != nil {
		return err
	}
	if e == nil {
		if c.JSON {
			fmt.Println("[]")
		}
		fmt.Fprintf(os.Stderr, "no sessions: there is no state directory %s\n", c.dir())
		return nil
	}
	recs, err := e.Store.Sessions(context.Background())
	if broken := (*lifecycle.BrokenError)(nil); err != nil && !errors.As(err, &broken) {
		return err
	}
	if c.JSON {
		shown := []*lifecycle.Record{}
		for _, r := range recs {
			if r.State != lifecycle.Ended || c.All {
				shown = append(shown, r)
			}
		}
		if jerr := printJSON(shown); jerr != nil {
			return jerr
		}
		return err
	}
	if lerr := sessionview.List(context.Background(), os.Stdout, e.Store.(*filestore.Store), recs, time.Now(), c.All); lerr != nil {
		return lerr
	}
	return err
}

// fromServer lists a page of a server's sessions, or with --all every
// page, and says on stderr how to get the next page when there is one.
func (c *SessionsListCmd) fromServer() error {
	ctx := context.Background()
	o := apiclient.ListOptions{Agent: c.Agent, State: c.State, Limit: c.Limit, Cursor: c.Cursor}
	var recs []*lifecycle.Record
	var next string
	var err error
	if c.All {
		recs, err = c.client().AllSessions(ctx, o)
	} else {
		recs, next, err = c.client().Sessions(ctx, o)
	}
	if err != nil {
		return err
	}
	if len(recs) == 0 && c.Agent != "" && c.Cursor == "" {
		// None, or an agent misspelt: said as run and acp say it.
		if _, err := c.client().Agent(ctx, c.Agent); err != nil {
			return err
		}
	}
	if c.JSON {
		err = printJSON(recs)
	} else {
		err = sessionview.List(ctx, os.Stdout, nil, recs, time.Now(), c.All)
	}
	if next != "" {
		fmt.Fprintf(os.Stderr, "more sessions: add --cursor %s for the next page, or --all for every one\n", next)
	}
	return err
}

// jsonFormat makes --json, the flag of every command whose output scripts
// read, mean --format json in a command that has both; with another
// --format it is a usage error.
func jsonFormat(asJSON bool, format *string) error {
	if !asJSON {
		return nil
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("--json and --format %s can't be used together", *format)
	}
	*format = "json"
	return nil
}

// printJSON prints v as indented JSON on stdout.
func printJSON(v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", data)
	return err
}

// SessionsShowCmd shows one session.
type SessionsShowCmd struct {
	StateFlags
	ServerFlags
	ID   string `arg:"" help:"The session id." predictor:"session"`
	JSON bool   `name:"json" help:"Print the session's record as the store keeps it, as JSON."`
}

// Run shows the session.
func (c *SessionsShowCmd) Run(g *Globals) error {
	st, rec, err := c.session(context.Background(), g, c.ID, c.ServerFlags)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(rec)
	}
	var actions func(io.Writer)
	if st == nil {
		var list []api.Action
		if rec.State != lifecycle.Ended {
			list, err = c.client().Actions(context.Background(), rec.ID)
		}
		actions = sessionview.ServerActions(rec, list, err, c.Server)
	} else {
		actions = localActions(rec)
	}
	return sessionview.Show(context.Background(), os.Stdout, st, rec, time.Now(), actions)
}

// session reads one session's record, without creating a state directory;
// with a server, the server's (the store is nil).
func (f *StateFlags) session(ctx context.Context, g *Globals, id string, sf ServerFlags) (*filestore.Store, *lifecycle.Record, error) {
	if sf.Server != "" {
		rec, err := sf.client().Session(ctx, id)
		return nil, rec, err
	}
	e, err := f.existingEngine(g)
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		return nil, nil, f.noSession(id)
	}
	rec, err := e.Store.Session(ctx, id)
	return e.Store.(*filestore.Store), rec, err
}

// SessionsLogCmd shows a session's transcript.
type SessionsLogCmd struct {
	StateFlags
	ServerFlags
	ID     string `arg:"" help:"The session id." predictor:"session"`
	Follow bool   `short:"f" help:"While a run of the session is in progress, keep showing its messages as they are recorded, until it ends."`
	JSON   bool   `name:"json" help:"Print the transcript's records as they are stored: one JSON object per line (see docs/messages.md)."`
	Plugs  bool   `help:"Print what the session's plugs logged (ctx.log), by run, instead of the transcript; with --json, its lines as stored."`
}

// Run prints the transcript.
func (c *SessionsLogCmd) Run(g *Globals) error {
	st, rec, err := c.session(context.Background(), g, c.ID, c.ServerFlags)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Plugs {
		return c.plugLog(ctx, st, rec.ID)
	}
	o := sessionview.LogOptions{
		Out: os.Stdout, Err: os.Stderr, Color: g.color().Styled(os.Stdout),
		Store: st, ID: rec.ID, Follow: c.Follow, Records: c.JSON,
	}
	if st == nil {
		cl := c.client()
		o.Server = func(ctx context.Context, after int64) (io.ReadCloser, int64, error) {
			b, err := cl.Transcript(ctx, rec.ID, after)
			if err != nil {
				return nil, 0, err
			}
			return b, b.Next, nil
		}
		o.Live = func(ctx context.Context) (bool, error) {
			r, err := cl.Session(ctx, rec.ID)
			return err == nil && r.State == lifecycle.Active, err
		}
	}
	return sessionview.WriteLog(ctx, o)
}

// plugLog prints the session's plug log, from st or, without, the server.
func (c *SessionsLogCmd) plugLog(ctx context.Context, st *filestore.Store, id string) error {
	if c.Follow {
		return errors.New("--follow does not work with --plugs: run sessions log --plugs again")
	}
	var lines []lifecycle.PlugLogLine
	var err error
	if st != nil {
		lines, err = st.PlugLog(ctx, id)
	} else {
		lines, err = c.client().PlugLog(ctx, id)
	}
	if err != nil {
		return err
	}
	return sessionview.WritePlugLog(os.Stdout, lines, c.JSON)
}

// SessionsPruneCmd removes ended sessions.
type SessionsPruneCmd struct {
	StateFlags
	OlderThan time.Duration `help:"Only sessions that ended at least this long ago (e.g. 168h); default: every ended session."`
}

// Run prunes and names each session it removed.
func (c *SessionsPruneCmd) Run(g *Globals) error {
	e, err := c.existingEngine(g)
	if err != nil || e == nil {
		return err // no state directory: nothing to prune
	}
	pruned, err := e.Store.(*filestore.Store).Prune(context.Background(), time.Now().Add(-c.OlderThan))
	for _, id := range pruned {
		fmt.Printf("pruned session %s\n", id)
	}
	return err
}

// SessionsEndCmd ends a session.
type SessionsEndCmd struct {
	StateFlags
	ServerFlags
	ID string `arg:"" help:"The session id." predictor:"session"`

	already bool // the session had ended before it was asked to
}

// Run ends the session and reports its state; it fails when the teardown
// failed.
func (c *SessionsEndCmd) Run(g *Globals) error {
	rec, err := c.end(g)
	if err != nil {
		return err
	}
	if c.already {
		// Not a failure: what was asked is so.
		fmt.Printf("session %s had ended already (%s)\n", rec.ID, rec.EndReason)
		return nil
	}
	return printEnded(os.Stdout, rec)
}

// printEnded says where a session that was ended stands, and fails when
// its teardown failed.
func printEnded(w io.Writer, rec *lifecycle.Record) error {
	printState(w, rec)
	if err := rec.Unsettled(); err != nil {
		return fmt.Errorf("session %s: %w", rec.ID, err)
	}
	return nil
}

func (c *SessionsEndCmd) end(g *Globals) (*lifecycle.Record, error) {
	ctx := context.Background()
	if c.Server != "" {
		api := c.client()
		if rec, err := api.Session(ctx, c.ID); err == nil && rec.State == lifecycle.Ended {
			c.already = true
			return rec, nil
		}
		return api.End(ctx, c.ID)
	}
	e, err := c.existingEngine(g)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, c.noSession(c.ID)
	}
	if rec, err := e.Store.Session(ctx, c.ID); err == nil && rec.State == lifecycle.Ended {
		c.already = true
		return rec, nil
	}
	return e.End(ctx, c.ID)
}

// SessionsSweepCmd settles sessions at rest.
type SessionsSweepCmd struct {
	StateFlags
}

// Run sweeps; it fails when something could not be settled.
func (c *SessionsSweepCmd) Run(g *Globals) error {
	e, err := c.existingEngine(g)
	if err != nil || e == nil {
		return err // no state directory: nothing to settle
	}
	return e.Sweep(context.Background())
}

// SessionsResolveCmd resolves an orphaned session.
type SessionsResolveCmd struct {
	StateFlags
	ServerFlags
	ID string `arg:"" help:"The session id." predictor:"session"`
}

// Run resolves the session.
func (c *SessionsResolveCmd) Run(g *Globals) error {
	if c.Server != "" {
		rec, err := c.client().Resolve(context.Background(), c.ID)
		if err == nil {
			printState(os.Stdout, rec)
		}
		return err
	}
	e, err := c.existingEngine(g)
	if err != nil {
		return err
	}
	if e == nil {
		return c.noSession(c.ID)
	}
	rec, err := e.Resolve(context.Background(), c.ID)
	if err != nil {
		return err
	}
	printState(os.Stdout, rec)
	return nil
}

// SessionsTitleCmd sets a session's title.
type SessionsTitleCmd struct {
	StateFlags
	ServerFlags
	ID    string `arg:"" help:"The session id." predictor:"session"`
	Title string `arg:"" help:"The new title."`
}

// Run sets the title and prints it.
func (c *SessionsTitleCmd) Run(g *Globals) error {
	rec, err := c.set(context.Background(), g)
	if err != nil {
		return err
	}
	fmt.Printf("session %s: %s\n", rec.ID, rec.Title)
	return nil
}

func (c *SessionsTitleCmd) set(ctx context.Context, g *Globals) (*lifecycle.Record, error) {
	if c.Server != "" {
		return c.client().SetTitle(ctx, c.ID, c.Title)
	}
	e, err := c.existingEngine(g)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, c.noSession(c.ID)
	}
	return lifecycle.SetTitle(ctx, e.Store, c.ID, c.Title)
}

// printState says where a session stands; why a teardown failed is the
// command's error.
func printState(w io.Writer, rec *lifecycle.Record) {
	if rec.State == lifecycle.Ended {
		fmt.Fprintf(w, "session %s ended (%s)\n", rec.ID, rec.EndReason)
		return
	}
	fmt.Fprintf(w, "session %s is %s\n", rec.ID, rec.State)
}
