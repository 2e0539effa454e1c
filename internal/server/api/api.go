// Package api is what the server's HTTP API and its clients share: the
// paths, headers and JSON types of docs/protocol.md, with no server code,
// so that a client (apiclient, listen) links no SQL driver and no dashboard.
package api

import (
	"encoding/json"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Paths of the client API (docs/protocol.md).
const (
	PathAgents   = "/v1/agents"
	PathSessions = "/v1/sessions"
	// ACPSubprotocol is the WebSocket subprotocol of a client's ACP
	// connection: ACP messages, one per line, in binary messages.
	ACPSubprotocol = "acp.v1"
	// HeaderTranscriptNext, on a transcript, is the number of the last
	// chunk it holds: a client that follows the transcript asks for what
	// comes ?after= it (docs/server.md).
	HeaderTranscriptNext = "Blaise-Transcript-Next"
)

// AgentJSON is an agent in the API: durations as Go durations ("24h").
type AgentJSON struct {
	Name            string `json:"name"`
	Config          string `json:"config,omitempty"`
	IdlePolicy      string `json:"idle_policy,omitempty"`
	PausedLifetime  string `json:"paused_lifetime,omitempty"`
	InactivityLimit string `json:"inactivity_limit,omitempty"`
	Timeout         string `json:"timeout,omitempty"`
	// A failed teardown is tried again after TeardownBackoff, doubling,
	// TeardownAttempts times in all (L2).
	TeardownBackoff  string `json:"teardown_backoff,omitempty"`
	TeardownAttempts int    `json:"teardown_attempts,omitempty"`
	Created          string `json:"created,omitempty"`
	Updated          string `json:"updated,omitempty"`
}

// Page sizes of the sessions list (docs/protocol.md#sessions).
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// HeaderNextCursor carries the cursor of the sessions list's next page;
// absent on its last.
const HeaderNextCursor = "Blaise-Next-Cursor"

// Action is an action a session's chain offers (docs/plugs.md#actions), as
// GET /v1/sessions/ID/actions lists it.
type Action struct {
	// Name picks it: NAME, or ID.NAME when several plugs offer NAME.
	Name string `json:"name"`
	Plug string `json:"plug"`
	Doc  string `json:"doc,omitempty"`
	// Args are its arguments, as its schema declares them.
	Args []ActionArg `json:"args,omitempty"`
	// Schema is the schema of its arguments as JSON (interp's encoding),
	// by which the server checks them before the action's run; none from
	// a runner older than it.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// ActionArg is an argument of an action: Kind is its schema's kind
// (string, bool, int, …).
type ActionArg struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Doc  string `json:"doc,omitempty"`
}

// ArgProblem is what is wrong with an action's argument, in the error
// answer to POST /v1/sessions/ID/actions/NAME that refuses its arguments:
// Path names it (args.NAME), Problem says what was wanted.
type ArgProblem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// ActionLine is a line of the answer to POST /v1/sessions/ID/actions/NAME
// (application/x-ndjson): the action's output as it comes, then one last
// line with Done, and the value the action returned or its error.
type ActionLine struct {
	Output string          `json:"output,omitempty"`
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Unknown, with Error: the action's run ended before it reported how
	// the action went (its runner went away): what it did is to be checked.
	Unknown bool `json:"unknown,omitempty"`
}

// SessionPatchJSON is what PATCH /v1/sessions/ID changes of a session: its
// title, which a person sets (lifecycle.SetTitle).
type SessionPatchJSON struct {
	Title string `json:"title"`
}

// ForkJSON is the answer to POST /v1/sessions/ID/fork: the fork, a new
// session, paused (its record, as GET /v1/sessions/ID gives it), and, when
// its conversation with the agent starts afresh rather than as a fork of
// the parent's, why.
type ForkJSON struct {
	Session *lifecycle.Record `json:"session"`
	Fresh   string            `json:"fresh,omitempty"`
}
