// Package blaise is the control plane: the lifecycle of sessions (settings,
// states, stop directives, reports), the store that keeps them, and the
// protocol between a front end and its session processes.
package blaise

import (
	"fmt"
	"time"
)

// State is the state of a session's environment (L2).
type State string

const (
	Active      State = "active"       // a run is in progress or about to start
	Paused      State = "paused"       // no run; the environment is kept
	TearingDown State = "tearing_down" // the session is over; teardown runs or is due
	Ended       State = "ended"        // torn down; persisted plug state deleted
	Orphaned    State = "orphaned"     // teardown kept failing; a person must act
)

// SessionRecord is what the store keeps of a session.
type SessionRecord struct {
	ID     string `json:"id"`
	Config string `json:"config"` // absolute path of the blaise.star
	// Dir is the working directory of the session's first run: every run
	// of the session runs there, wherever its command was started.
	Dir       string    `json:"dir,omitempty"`
	AgentName string    `json:"agent_name"`
	State     State     `json:"state"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Runs      int       `json:"runs"` // runs started so far
	Settings  Settings  `json:"settings"`
	// Resumable is what the last run reported: whether the chain can resume.
	Resumable bool `json:"resumable"`
	// ACPSessionID is the agent's session id, loaded again on resume.
	ACPSessionID string `json:"acp_session_id,omitempty"`
	// Stop is the last stop directive, recorded before it is sent (L3).
	Stop *StopRecord `json:"stop,omitempty"`
	// Pause is the pause the last run reported.
	Pause *PauseRecord `json:"pause,omitempty"`
	// PausedAt and ExpiresAt are set while the session is paused (L6).
	PausedAt  time.Time `json:"paused_at,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// EndReason is why the session is over, once it is.
	EndReason string `json:"end_reason,omitempty"`
	// Teardown counts failed teardowns and says when the next one is due.
	Teardown TeardownRecord `json:"teardown,omitzero"`
	// OrphanedState lists stored plug ids of no plug of the configuration (L7).
	OrphanedState []string `json:"orphaned_state,omitempty"`
	// PID is the session process of the current run, while one runs.
	PID int `json:"pid,omitempty"`
}

// StopRecord is a stop directive.
type StopRecord struct {
	Reason    string    `json:"reason"`
	MayResume bool      `json:"may_resume"`
	At        time.Time `json:"at"`
	Run       int       `json:"run"` // the run it was sent to
	Delivered bool      `json:"delivered"`
}

// PauseRecord is a reported pause.
type PauseRecord struct {
	Reason    string    `json:"reason"`
	MayResume bool      `json:"may_resume"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
	Run       int       `json:"run"`
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
func (r *SessionRecord) Unsettled() error {
	switch r.State {
	case TearingDown:
		return fmt.Errorf("teardown failed (attempt %d of %d): %s; `blaise-agent sessions sweep` retries it from %s",
			r.Teardown.Attempts, r.Settings.TeardownAttempts, r.Teardown.LastError, r.Teardown.NextAt.Local().Format(time.DateTime))
	case Orphaned:
		return fmt.Errorf("orphaned: teardown failed %d times: %s; clean up what its plugs left behind, then run `blaise-agent sessions resolve %s`",
			r.Teardown.Attempts, r.Teardown.LastError, r.ID)
	}
	return nil
}
