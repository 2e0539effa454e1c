package lifecycle

import "time"

// MaxHistory bounds a record's History: only the last runs are kept.
const MaxHistory = 50

// RunRecord is one run of a session as its record's History keeps it: its
// kind, when it began and ended, the stop it was sent, the pause it
// reported and its teardown.
type RunRecord struct {
	Run int `json:"run"`
	// Kind is empty for a run whose beginning was not recorded (a record
	// older than its history).
	Kind     Kind         `json:"kind,omitempty"`
	Started  time.Time    `json:"started,omitzero"`
	Ended    time.Time    `json:"ended,omitzero"`
	Stop     *Stop        `json:"stop,omitempty"`
	Pause    *RunPause    `json:"pause,omitempty"`
	Teardown *RunTeardown `json:"teardown,omitempty"`
}

// RunPause is the pause a run reported.
type RunPause struct {
	Reason    Reason `json:"reason"`
	MayResume bool   `json:"may_resume"`
	Error     string `json:"error,omitempty"`
}

// RunTeardown is how a run's teardown ended: Error is empty when it
// succeeded.
type RunTeardown struct {
	Reason Reason `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// BeginRun counts the next run of rec, of kind, beginning at at, and adds
// it to the history.
func BeginRun(rec *Record, kind Kind, at time.Time) {
	rec.Runs++
	*rec.history(rec.Runs) = RunRecord{Run: rec.Runs, Kind: kind, Started: at}
}

// ForgetRun takes back the run BeginRun counted last: its process never
// started.
func ForgetRun(rec *Record) {
	if n := len(rec.History); n > 0 && rec.History[n-1].Run == rec.Runs {
		rec.History = rec.History[:n-1]
	}
	rec.Runs--
}

// history returns run n's entry of rec's history, added if it is missing;
// the oldest entries go past MaxHistory.
func (rec *Record) history(n int) *RunRecord {
	for i := len(rec.History) - 1; i >= 0; i-- {
		if rec.History[i].Run == n {
			return &rec.History[i]
		}
	}
	rec.History = append(rec.History, RunRecord{Run: n})
	if over := len(rec.History) - MaxHistory; over > 0 {
		rec.History = append(rec.History[:0], rec.History[over:]...)
	}
	return &rec.History[len(rec.History)-1]
}

// ended records in run n's history that it ended at at, with the stop the
// run was sent, if any.
func (rec *Record) ended(n int, at time.Time) *RunRecord {
	h := rec.history(n)
	h.Ended = at
	if rec.Stop != nil && rec.Stop.Run == n {
		s := rec.Stop.Stop
		h.Stop = &s
	}
	return h
}
