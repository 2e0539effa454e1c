// Package lifecycle holds the lifecycle's types (docs/sessions.md): run kinds,
// reasons, stops, pauses, teardowns, states, the session record, settings,
// the control messages between a front end and a run, the clock, and the
// interfaces of the control plane's store. It imports no Starlark and does
// no I/O, so that the control plane and the chain share it without
// sharing anything else.
package lifecycle

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Kind is the kind of a run (C7).
type Kind string

const (
	StartRun    Kind = "start"
	ResumeRun   Kind = "resume"
	TeardownRun Kind = "teardown"
)

// Reason is why a run ended or a session is over (C3, C8).
type Reason string

const (
	Idle      Reason = "idle"
	Completed Reason = "completed"
	Closed    Reason = "closed"
	Cancelled Reason = "cancelled"
	Timeout   Reason = "timeout"
	Failed    Reason = "failed"
	Expired   Reason = "expired" // teardown runs only
)

// StopReasons are the reasons a stop directive may carry: failed and
// expired are never sent (L5).
var StopReasons = []Reason{Idle, Completed, Closed, Cancelled, Timeout}

// State is the state of a session's environment (L2).
type State string

const (
	Active      State = "active"       // a run is in progress or about to start
	Paused      State = "paused"       // no run; the environment is kept
	TearingDown State = "tearing_down" // the session is over; teardown runs or is due
	Ended       State = "ended"        // torn down; persisted plug state deleted
	Orphaned    State = "orphaned"     // teardown kept failing; a person must act
)

// States are the states, in the order a session may pass through them.
var States = []State{Active, Paused, TearingDown, Ended, Orphaned}

// Stop is a stop directive: why the run must end and whether the session
// may resume later (L3).
type Stop struct {
	Reason    Reason `json:"reason"`
	MayResume bool   `json:"may_resume"`
}

// Pause is how a run ended (C3): what next() returns to on_session and
// what the run reports (L7). Err is set when Reason is failed.
type Pause struct {
	Reason    Reason
	MayResume bool
	Err       error
	// Changes is the summary a plug reported during the run, if any.
	Changes *Changes
}

// Teardown is how a teardown ended (C8): its reason, and Err when it failed.
type Teardown struct {
	Reason Reason
	Err    error
}

// Record is what the store keeps of a session.
type Record struct {
	ID     string `json:"id"`
	Config string `json:"config"` // absolute path of the blaise.star
	// Dir is the working directory of the session's first run: every run
	// of the session runs there, wherever its command was started.
	Dir       string `json:"dir,omitempty"`
	AgentName string `json:"agent_name"`
	// Owner, on a server, is the name of the API token whose client opened
	// the session (`tokens api NAME`): a client's `run --continue` takes
	// the last paused session of its own.
	Owner   string    `json:"owner,omitempty"`
	State   State     `json:"state"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Runs    int       `json:"runs"` // runs started so far
	// Settings are in force; until the first run has loaded the
	// configuration they are Asked's, normalized.
	Settings Settings `json:"settings"`
	// Asked are the settings the front end asked for (its flags): the
	// first run lays them over the configuration's session(...).
	Asked Settings `json:"asked,omitzero"`
	// Resumable is what the last run reported: whether the chain can resume.
	Resumable bool `json:"resumable"`
	// ACPSessionID is the agent's session id, loaded again on resume.
	ACPSessionID string `json:"acp_session_id,omitempty"`
	// CWD and MCPServers (raw JSON) are the params of the client's last
	// session/new or session/load: a resume loads the agent's session with
	// them.
	CWD        string          `json:"cwd,omitempty"`
	MCPServers json.RawMessage `json:"mcp_servers,omitempty"`
	// Stop is the last stop directive, recorded before it is sent (L3).
	Stop *StopRecord `json:"stop,omitempty"`
	// Pause is the pause the last run reported.
	Pause *PauseRecord `json:"pause,omitempty"`
	// PausedAt and ExpiresAt are set while the session is paused (L6).
	PausedAt  time.Time `json:"paused_at,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// EndReason is why the session is over, once it is.
	EndReason Reason `json:"end_reason,omitempty"`
	// Teardown counts failed teardowns and says when the next one is due.
	Teardown TeardownRecord `json:"teardown,omitzero"`
	// OrphanedState lists stored plug ids of no plug of the configuration (L7).
	OrphanedState []string `json:"orphaned_state,omitempty"`
	// PID is the session process of the current run, while one runs.
	PID int `json:"pid,omitempty"`
	// Runner is the runner of the session's last run, on a server: the
	// session resumes there when it can (docs/server.md#runners).
	Runner string `json:"runner,omitempty"`
	// RunnerID is that runner's credential id: names are not unique, so
	// only this runner may hand the run back after a restart.
	RunnerID string `json:"runner_id,omitempty"`
	// ForkedFrom is the session this one is a fork of (sessions fork): its
	// first run starts from that session's environment as it was then.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Title names the session in lists, which filter on it; empty until
	// something records one (the first line of the first prompt is meant,
	// redacted as the transcript is: the session process knows the
	// secrets, the front end does not).
	Title string `json:"title,omitempty"`
	// TitleSet: a person set Title (SetTitle); derived titles no longer
	// replace it.
	TitleSet bool `json:"title_set,omitempty"`
	// History is the last MaxHistory runs, oldest first (BeginRun,
	// ApplyPause, ApplyTeardown).
	History []RunRecord `json:"history,omitempty"`
	// Changes is the last summary of the session's changes a plug
	// reported, at a pause or in an action.
	Changes *Changes `json:"changes,omitempty"`
}

// StopRecord is a stop directive as recorded.
type StopRecord struct {
	Stop
	At        time.Time `json:"at"`
	Run       int       `json:"run"` // the run it was sent to
	Delivered bool      `json:"delivered"`
}

// PauseRecord is a reported pause, as recorded and as reported.
type PauseRecord struct {
	Reason    Reason    `json:"reason"`
	MayResume bool      `json:"may_resume"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
	Run       int       `json:"run"`
	Changes   *Changes  `json:"changes,omitempty"`
	// ACPSessionID is the agent's session the run worked in, as its
	// session process saw it opened or loaded; "" when it saw none.
	ACPSessionID string `json:"acp_session_id,omitempty"`
}

// Record is the record of p, the pause of run, at at.
func (p Pause) Record(run int, at time.Time) PauseRecord {
	r := PauseRecord{Reason: p.Reason, MayResume: p.MayResume, At: at, Run: run, Changes: p.Changes}
	if p.Err != nil {
		r.Error = p.Err.Error()
	}
	return r
}

// TeardownRecord tracks teardown attempts.
type TeardownRecord struct {
	Attempts  int       `json:"attempts,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	NextAt    time.Time `json:"next_at,omitzero"`
}

// Unsettled explains a session whose teardown failed, and what comes next:
// a retry by the next sweep, or, once orphaned, a person who cleans up what
// its plugs left behind and resolves it (L2). It is nil for other states.
func (r *Record) Unsettled() error {
	// A server's session (it ran on a runner) is retried by the server,
	// and resolved through it.
	retry, resolve := "`blaise-agent sessions sweep` retries it", "run `blaise-agent sessions resolve "+r.ID+"`"
	if r.Runner != "" {
		retry = "the server retries it"
		resolve = "resolve it: `blaise-agent sessions resolve " + r.ID + " --server URL`, or Resolve on the server's dashboard"
	}
	switch r.State {
	case TearingDown:
		return fmt.Errorf("teardown failed (attempt %d of %d): %s; %s from %s",
			r.Teardown.Attempts, r.Settings.TeardownAttempts, r.Teardown.LastError, retry, r.Teardown.NextAt.Local().Format(time.DateTime))
	case Orphaned:
		return fmt.Errorf("orphaned: teardown failed %d times: %s; clean up what its plugs left behind, then %s",
			r.Teardown.Attempts, r.Teardown.LastError, resolve)
	}
	return nil
}

// StateError explains why a session in its state cannot do what was asked.
func StateError(r *Record, want string) error {
	return fmt.Errorf("session %s is %s; %s", r.ID, r.State, want)
}

// ReasonList is rs as "a, b, c", for messages that name the choices.
func ReasonList(rs []Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
