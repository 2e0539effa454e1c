package sessionview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// Show writes what the store keeps of a session, for a person: where it was
// created, its state, a table of its runs (the last lifecycle.MaxHistory)
// with their stops, pauses and teardowns, the last stop, pause and teardown, when
// it expires, its settings, its plugs' stored state (orphaned state named as
// such) and its transcript. Times are shown in now's location. A server's
// session (st nil) shows what its record says: its stored state and its
// transcript are the server's. tail, when set, writes more lines in the
// same columns (Actions).
func Show(ctx context.Context, out io.Writer, st *filestore.Store, rec *lifecycle.Record, now time.Time, tail func(io.Writer)) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	at := func(t time.Time) string {
		d := now.Sub(t).Round(time.Second)
		ago := d.String() + " ago"
		if d < 0 {
			ago = "in " + (-d).String()
		}
		return t.In(now.Location()).Format(time.DateTime+" MST") + " (" + ago + ")"
	}
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s:\t"+format+"\n", append([]any{k}, args...)...) }
	more := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }

	fmt.Fprintf(w, "session %s\n", rec.ID)
	if rec.Title != "" {
		title := rec.Title
		if rec.TitleSet {
			title += " (set by a person)"
		}
		row("title", "%s", title)
	}
	state := string(rec.State)
	if rec.EndReason != "" {
		state += " (" + string(rec.EndReason) + ")"
	}
	row("state", "%s", state)
	// A server's session has its runner's configuration and directory, as
	// the runner said; one that no runner has run, or whose runner did not
	// say (an older blaise-agent), has none to show.
	config := rec.Config
	if config == "" {
		config = "unknown"
	}
	row("config", "%s", config)
	if rec.Dir != "" {
		row("directory", "%s", rec.Dir)
	}
	if rec.AgentName != "" {
		row("agent", "%s", rec.AgentName)
	}
	if rec.Runner != "" {
		row("runner", "%s", rec.Runner)
	}
	if rec.Owner != "" {
		row("owner", "%s (its API token's name)", rec.Owner)
	}
	if rec.ForkedFrom != "" {
		row("forked from", "%s (sessions fork)", rec.ForkedFrom)
	}
	row("created", "%s", at(rec.Created))
	row("updated", "%s", at(rec.Updated))
	resume := "the chain can resume"
	if !rec.Resumable {
		resume = "the chain cannot resume"
	}
	row("runs", "%d (%s)", rec.Runs, resume)
	history(w, rec, now)
	if rec.PID != 0 {
		row("process", "%d", rec.PID)
	}
	if s := rec.Stop; s != nil {
		sent := "delivered"
		if !s.Delivered {
			sent = "not delivered"
		}
		row("last stop", "%s to run %d, %s, %s", s.Reason, s.Run, mayResume(s.MayResume), sent)
		more("at %s", at(s.At))
	}
	if p := rec.Pause; p != nil {
		row("last pause", "run %d: %s, %s", p.Run, p.Reason, mayResume(p.MayResume))
		more("at %s", at(p.At))
		if p.Error != "" {
			indented(w, p.Error)
		}
	}
	if !rec.ExpiresAt.IsZero() {
		row("expires", "%s", at(rec.ExpiresAt))
	}
	if t := rec.Teardown; t.Attempts > 0 {
		row("teardown", "failed %d of %d times", t.Attempts, rec.Settings.TeardownAttempts)
		if !t.NextAt.IsZero() {
			more("next attempt %s", at(t.NextAt))
		}
		if t.LastError != "" {
			indented(w, t.LastError)
		}
	}
	s := rec.Settings
	row("settings", "idle policy %s, paused lifetime %s, inactivity limit %s, timeout %s, startup limit %s",
		s.IdlePolicy, s.PausedLifetime, s.InactivityLimit, s.Timeout, s.StartupLimit)
	if st != nil {
		if err := stored(ctx, w, st, rec); err != nil {
			return err
		}
		runs, records, err := transcriptSize(st.TranscriptPath(rec.ID))
		if err != nil {
			return fmt.Errorf("session %s: transcript: %w", rec.ID, err)
		}
		row("transcript", "%s (%s, %s)", st.TranscriptPath(rec.ID), counted(records, "record"), counted(runs, "run"))
	}
	if tail != nil {
		tail(w) // in the same columns
	}
	if rec.State == lifecycle.Orphaned {
		fmt.Fprintf(w, "clean up what its plugs left behind, then run: blaise-agent sessions resolve %s\n", rec.ID)
	}
	return w.Flush()
}

// stored lists the plugs with stored state, and the orphaned state: stored
// state of no plug of the configuration.
func stored(ctx context.Context, w io.Writer, st *filestore.Store, rec *lifecycle.Record) error {
	named, err := StoredPlugs(ctx, st, rec.ID)
	if err != nil {
		return err
	}
	if len(named) > 0 {
		fmt.Fprintf(w, "stored state:\t%s\n", strings.Join(named, ", "))
	}
	if len(rec.OrphanedState) > 0 {
		fmt.Fprintf(w, "orphaned state:\t%s (stored state of no plug of the configuration)\n", strings.Join(rec.OrphanedState, ", "))
	}
	return nil
}

// StoredPlugs names the plug ids with stored state in a session, each with
// the name of the plug that stored it when it can be read: "wt
// (blaise/worktree)".
func StoredPlugs(ctx context.Context, st *filestore.Store, session string) ([]string, error) {
	ids, err := st.PersistedIDs(ctx, session)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if name, ok, err := st.PersistedPlug(ctx, session, id); err == nil && ok {
			ids[i] += " (" + name + ")"
		}
	}
	return ids, nil
}

// A RunRow is one run of a session's history as `sessions show` and the
// dashboard show it; a column with nothing to say is "-".
type RunRow struct {
	Run                         int
	Kind, Stop, Pause, Teardown string
	Started, Ended              time.Time // zero when not recorded
	PauseError, TeardownError   string
}

// Runs returns the rows of the runs rec's history keeps, oldest first.
func Runs(rec *lifecycle.Record) []RunRow {
	rows := make([]RunRow, len(rec.History))
	for i, h := range rec.History {
		r := RunRow{Run: h.Run, Kind: "-", Stop: "-", Pause: "-", Teardown: "-", Started: h.Started, Ended: h.Ended}
		if h.Kind != "" {
			r.Kind = string(h.Kind)
		}
		if s := h.Stop; s != nil {
			r.Stop = string(s.Reason)
		} else if s := rec.Stop; s != nil && s.Run == h.Run {
			r.Stop = string(s.Reason) // sent to a run that has not ended
		}
		if p := h.Pause; p != nil {
			r.Pause = fmt.Sprintf("%s, %s", p.Reason, mayResume(p.MayResume))
			r.PauseError = p.Error
		}
		if t := h.Teardown; t != nil {
			r.Teardown = "ok"
			if t.Error != "" {
				r.Teardown = "error"
			}
			if t.Reason != "" {
				r.Teardown = string(t.Reason) + ", " + r.Teardown
			}
			r.TeardownError = t.Error
		}
		rows[i] = r
	}
	return rows
}

// history writes the runs the record keeps as a table below the runs row,
// then the errors of their pauses and teardowns.
func history(w io.Writer, rec *lifecycle.Record, now time.Time) {
	rows := Runs(rec)
	if len(rows) == 0 {
		return
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(now.Location()).Format(time.DateTime)
	}
	if first := rows[0].Run; first > 1 {
		fmt.Fprintf(w, "\tthe last %d runs (from run %d)\n", len(rows), first)
	}
	fmt.Fprintln(w, "\tRUN\tKIND\tSTARTED\tENDED\tSTOP\tPAUSE\tTEARDOWN")
	for _, r := range rows {
		fmt.Fprintf(w, "\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Run, r.Kind, when(r.Started), when(r.Ended), r.Stop, r.Pause, r.Teardown)
	}
	for _, r := range rows {
		if r.PauseError != "" {
			fmt.Fprintf(w, "\trun %d, pause:\n", r.Run)
			indented(w, r.PauseError)
		}
		if r.TeardownError != "" {
			fmt.Fprintf(w, "\trun %d, teardown:\n", r.Run)
			indented(w, r.TeardownError)
		}
	}
}

// indented writes an error's lines below a row, indented.
func indented(w io.Writer, msg string) {
	for line := range strings.SplitSeq(strings.TrimRight(msg, "\n"), "\n") {
		fmt.Fprintf(w, "\t  %s\n", line)
	}
}

func mayResume(ok bool) string {
	if ok {
		return "may resume"
	}
	return "may not resume"
}

// transcriptSize counts a transcript's records and runs (each run numbers
// its records from 1).
func transcriptSize(path string) (runs, records int, err error) {
	err = Lines(context.Background(), path, nil, func(line []byte) {
		records++
		var r struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(line, &r) == nil && r.Seq == 1 {
			runs++
		}
	})
	return runs, records, err
}

// counted is n of noun, plural unless n is 1: "1 run", "10 records".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
