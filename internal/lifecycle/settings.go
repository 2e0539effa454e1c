package lifecycle

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"time"
)

// IdlePolicy says what happens to an idle session (L1).
type IdlePolicy string

const (
	PolicyPause IdlePolicy = "pause"
	PolicyEnd   IdlePolicy = "end"
)

// MayResume is the one rule that turns the idle policy and the chain's
// resumability into may_resume (L4): a run that ends idle or failed may
// resume under the pause policy when its chain can resume, unless a stop
// that ends the session was sent to it; every other reason ends it.
func (p IdlePolicy) MayResume(reason Reason, resumable bool, stop *Stop) bool {
	if stop != nil && !stop.MayResume {
		return false
	}
	switch reason {
	case Idle, Failed:
		return p == PolicyPause && resumable
	}
	return false
}

// IdleStop is the stop an idle session gets under the policy (L4, L9):
// idle, which may resume unless a plug cannot, or completed.
func (p IdlePolicy) IdleStop(resumable bool) Stop {
	if p == PolicyEnd {
		return Stop{Reason: Completed}
	}
	return Stop{Reason: Idle, MayResume: p.MayResume(Idle, resumable, nil)}
}

// Settings are an agent's lifecycle settings (L1).
type Settings struct {
	IdlePolicy      IdlePolicy    `json:"idle_policy,omitempty"`
	PausedLifetime  time.Duration `json:"paused_lifetime,omitempty"`
	InactivityLimit time.Duration `json:"inactivity_limit,omitempty"`
	Timeout         time.Duration `json:"timeout,omitempty"`
	// StartupLimit bounds how long the agent may take to answer initialize.
	StartupLimit time.Duration `json:"startup_limit,omitempty"`
	// A failed teardown is tried again after TeardownBackoff, doubling each
	// time; after TeardownAttempts failures the session is orphaned (L2).
	TeardownBackoff  time.Duration `json:"teardown_backoff,omitempty"`
	TeardownAttempts int           `json:"teardown_attempts,omitempty"`
}

// The defaults of the source documents.
const (
	DefaultPausedLifetime    = 24 * time.Hour
	DefaultMaxPausedLifetime = 7 * 24 * time.Hour
	DefaultInactivityLimit   = 5 * time.Minute
	DefaultTimeout           = 30 * time.Minute
	DefaultStartupLimit      = time.Minute
	// DefaultStopGrace is how long a handler still attaching when its run
	// is stopped may take to reach next().
	DefaultStopGrace = 10 * time.Second
	// TimeoutGrace is how long a run may ignore a timeout stop before it is
	// failed (L5).
	TimeoutGrace            = time.Minute
	DefaultTeardownBackoff  = 2 * time.Second
	DefaultTeardownAttempts = 5
)

// DefaultSettings returns the seed's defaults.
func DefaultSettings() Settings {
	return Settings{
		IdlePolicy:      PolicyPause,
		PausedLifetime:  DefaultPausedLifetime,
		InactivityLimit: DefaultInactivityLimit,
		Timeout:         DefaultTimeout,
		StartupLimit:    DefaultStartupLimit,

		TeardownBackoff:  DefaultTeardownBackoff,
		TeardownAttempts: DefaultTeardownAttempts,
	}
}

// Over returns s over c (the settings of a configuration's session(...),
// or the defaults): what s sets wins (flags over the file), the rest comes
// from c.
func (s Settings) Over(c Settings) Settings {
	s.IdlePolicy = cmp.Or(s.IdlePolicy, c.IdlePolicy)
	s.PausedLifetime = cmp.Or(s.PausedLifetime, c.PausedLifetime)
	s.InactivityLimit = cmp.Or(s.InactivityLimit, c.InactivityLimit)
	s.Timeout = cmp.Or(s.Timeout, c.Timeout)
	s.StartupLimit = cmp.Or(s.StartupLimit, c.StartupLimit)
	s.TeardownBackoff = cmp.Or(s.TeardownBackoff, c.TeardownBackoff)
	s.TeardownAttempts = cmp.Or(s.TeardownAttempts, c.TeardownAttempts)
	return s
}

// Normalize fills in defaults, checks the values and caps the paused
// lifetime at maxPaused (asking for more gets the cap).
func (s Settings) Normalize(maxPaused time.Duration) (Settings, error) {
	s = s.Over(DefaultSettings())
	if s.IdlePolicy != PolicyPause && s.IdlePolicy != PolicyEnd {
		return s, fmt.Errorf("idle policy: want pause or end, got %q", s.IdlePolicy)
	}
	for name, v := range map[string]time.Duration{"paused lifetime": s.PausedLifetime, "inactivity limit": s.InactivityLimit, "timeout": s.Timeout, "startup limit": s.StartupLimit} {
		if v < 0 {
			return s, fmt.Errorf("%s: must not be negative, got %s", name, v)
		}
	}
	if s.PausedLifetime > maxPaused {
		s.PausedLifetime = maxPaused
	}
	return s, nil
}

// MaxPausedLifetime is the operator's cap, SESSION_MAX_PAUSED_LIFETIME_MS
// (default 7 days).
func MaxPausedLifetime() (time.Duration, error) {
	v := os.Getenv("SESSION_MAX_PAUSED_LIFETIME_MS")
	if v == "" {
		return DefaultMaxPausedLifetime, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("SESSION_MAX_PAUSED_LIFETIME_MS: want a positive number of milliseconds, got %q", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// NormalizeSettings is s.Normalize under the operator's cap.
func NormalizeSettings(s Settings) (Settings, error) {
	max, err := MaxPausedLifetime()
	if err != nil {
		return s, err
	}
	return s.Normalize(max)
}
