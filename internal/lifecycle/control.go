package lifecycle

// ControlKind is the kind of a message on the control channel between a
// front end and a run, one JSON object per line. Every kind is here.
type ControlKind string

const (
	// ControlStop, front end to run: the stop directive in Stop (L3).
	ControlStop ControlKind = "stop"
	// ControlLoaded, the run's first report, once its plugs are loaded:
	// Loaded (L7, C12).
	ControlLoaded ControlKind = "loaded"
	// ControlPause reports the pause in Pause, before any teardown (L7).
	ControlPause ControlKind = "pause"
	// ControlTeardown reports the teardown in Teardown (L7).
	ControlTeardown ControlKind = "teardown"
	// ControlAttaching, as a start or resume run attaches: the plug in
	// Plug attaches now, or, with Plug "", the agent starts; the progress
	// a front end shows.
	ControlAttaching ControlKind = "attaching"
)

// Control is one message on the control channel; the field of its kind is
// set.
type Control struct {
	Kind     ControlKind     `json:"type"`
	Run      int             `json:"run"`
	Stop     *Stop           `json:"stop,omitempty"`
	Loaded   *Loaded         `json:"loaded,omitempty"`
	Pause    *PauseRecord    `json:"pause,omitempty"`
	Teardown *TeardownReport `json:"teardown,omitempty"`
	Plug     string          `json:"plug,omitempty"`
	Action   *ActionReport   `json:"action,omitempty"`
}

// Loaded is what a run reports once its plugs are loaded: whether the
// chain can resume, the settings in force (the front end's over the
// configuration's session(...)), and stored plug state of no plug of the
// configuration (L7).
type Loaded struct {
	Resumable     bool     `json:"resumable"`
	Settings      Settings `json:"settings"`
	OrphanedState []string `json:"orphaned_state,omitempty"`
}

// TeardownReport is a reported teardown: its reason, and its error when it
// failed.
type TeardownReport struct {
	Reason Reason `json:"reason"`
	Error  string `json:"error,omitempty"`
}
