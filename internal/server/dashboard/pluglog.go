package dashboard

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// plugLogShown is how many of a run's last plug log lines a session's
// page shows; the rest are a link away.
const plugLogShown = 500

// plugLogRun is one run's plug log on a session's page.
type plugLogRun struct {
	Run   int
	Lines []lifecycle.PlugLogLine // the last plugLogShown
	Total int                     // lines kept, the dropped count's line aside
	// Dropped is how many lines the run did not keep (its cap).
	Dropped int
}

// plugLogRuns groups a session's plug log by run.
func plugLogRuns(lines []lifecycle.PlugLogLine) []plugLogRun {
	var runs []plugLogRun
	for _, l := range lines {
		if len(runs) == 0 || runs[len(runs)-1].Run != l.Run {
			runs = append(runs, plugLogRun{Run: l.Run})
		}
		r := &runs[len(runs)-1]
		if l.Dropped > 0 {
			r.Dropped += l.Dropped
			continue
		}
		r.Total++
		r.Lines = append(r.Lines, l)
	}
	for i := range runs {
		if r := &runs[i]; len(r.Lines) > plugLogShown {
			r.Lines = r.Lines[len(r.Lines)-plugLogShown:]
		}
	}
	return runs
}

// plugLog serves a session's plug log as text, one line a line; with
// ?run=N, of that run only.
func (d *sessionPages) plugLog(w http.ResponseWriter, r *http.Request, u user) {
	id := r.PathValue("id")
	if _, err := d.Store.Session(r.Context(), id); err != nil {
		d.sessionView(r.Context(), w, u, http.StatusNotFound, id, "", "", "", 0)
		return
	}
	run := 0
	if s := r.URL.Query().Get("run"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			http.Error(w, "run="+s+": a run is a number from 1", http.StatusBadRequest)
			return
		}
		run = n
	}
	lines, err := d.Store.PlugLog(r.Context(), id)
	if err != nil {
		d.serverError(w, u, "reading the plug log", err)
		return
	}
	var b strings.Builder
	for _, l := range lines {
		if run == 0 || l.Run == run {
			b.WriteString(l.String() + "\n")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(b.String()))
}
