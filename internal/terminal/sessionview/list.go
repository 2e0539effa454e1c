package sessionview

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/filestore"
)

// List writes the table of recs (ended ones only with all), then,
// for each orphaned session, what it left and how to resolve it (L2); st
// is nil for a server's sessions.
func List(ctx context.Context, out io.Writer, st *filestore.Store, recs []*lifecycle.Record, now time.Time, all bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// A server's sessions are an agent's; its runners have the configuration.
	where := func(r *lifecycle.Record) string { return r.Config }
	shown := func(r *lifecycle.Record) bool { return all || r.State != lifecycle.Ended }
	// A column of titles only where a run recorded some: older sessions
	// have none, and their listing stays as it was.
	titles := slices.ContainsFunc(recs, func(r *lifecycle.Record) bool { return r.Title != "" && shown(r) })
	fmt.Fprint(w, "ID\tSTATE\tAGE\tRUNS\tLAST PAUSE\t")
	// A column of changes only where a plug reported some: the listing
	// of sessions whose plugs report none stays as it was.
	changes := slices.ContainsFunc(recs, func(r *lifecycle.Record) bool { return r.Changes != nil && shown(r) })
	if changes {
		fmt.Fprint(w, "CHANGES\t")
	}
	// Titles last: the columns before stay where scripts find them.
	last := "\n"
	if titles {
		last = "\tTITLE\n"
	}
	if st == nil {
		where = func(r *lifecycle.Record) string { return r.AgentName }
		fmt.Fprint(w, "AGENT"+last)
	} else {
		fmt.Fprint(w, "CONFIG"+last)
	}
	var orphaned []*lifecycle.Record
	for _, r := range recs {
		if !shown(r) {
			continue
		}
		pause := "-"
		if r.Pause != nil {
			pause = string(r.Pause.Reason)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t", r.ID, r.State, now.Sub(r.Created).Round(time.Second), r.Runs, pause)
		if changes {
			summary := "-"
			if r.Changes != nil {
				summary = r.Changes.String()
			}
			fmt.Fprintf(w, "%s\t", summary)
		}
		if titles {
			fmt.Fprintf(w, "%s\t%s\n", where(r), listedTitle(r))
		} else {
			fmt.Fprintf(w, "%s\n", where(r))
		}
		if r.State == lifecycle.Orphaned {
			orphaned = append(orphaned, r)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range orphaned {
		fmt.Fprintf(out, "\nsession %s is orphaned: its teardown failed %d times; the last error:\n", r.ID, r.Teardown.Attempts)
		for line := range strings.SplitSeq(strings.TrimRight(r.Teardown.LastError, "\n"), "\n") {
			fmt.Fprintf(out, "    %s\n", line)
		}
		var named []string
		if st != nil { // a server's store is the server's to read
			var err error
			if named, err = StoredPlugs(ctx, st, r.ID); err != nil {
				return err
			}
		}
		if len(named) > 0 {
			fmt.Fprintf(out, "  plugs with stored state: %s\n", strings.Join(named, ", "))
		}
		fmt.Fprintf(out, "  clean up what its plugs left behind, then run: blaise-agent sessions resolve %s\n", r.ID)
	}
	return nil
}

// listedTitle is title cut to a column's width; "-" when there is none.
func listedTitle(r *lifecycle.Record) string {
	const width = 40
	title := r.Title
	switch {
	case title == "" && r.ForkedFrom != "":
		// Until its first prompt names it.
		return "fork of " + r.ForkedFrom
	case title == "":
		return "-"
	}
	if r := []rune(title); len(r) > width {
		return string(r[:width-1]) + "…"
	}
	return title
}
