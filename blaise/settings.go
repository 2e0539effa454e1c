package blaise

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/runner"
)

// IdlePolicy says what happens to an idle session (L1).
type IdlePolicy string

const (
	PolicyPause IdlePolicy = "pause"
	PolicyEnd   IdlePolicy = "end"
)

// Settings are an agent's lifecycle settings (L1).
type Settings struct {
	IdlePolicy      IdlePolicy    `json:"idle_policy"`
	PausedLifetime  time.Duration `json:"paused_lifetime"`
	InactivityLimit time.Duration `json:"inactivity_limit"`
	Timeout         time.Duration `json:"timeout"`
	// StartupLimit bounds how long the agent may take to answer initialize.
	StartupLimit time.Duration `json:"startup_limit,omitempty"`
	// A failed teardown is tried again after TeardownBackoff, doubling each
	// time; after TeardownAttempts failures the session is orphaned (L2).
	TeardownBackoff  time.Duration `json:"teardown_backoff"`
	TeardownAttempts int           `json:"teardown_attempts"`
}

// The defaults of the source documents.
const (
	DefaultPausedLifetime    = 24 * time.Hour
	DefaultMaxPausedLifetime = 7 * 24 * time.Hour
	DefaultInactivityLimit   = 5 * time.Minute
	DefaultTimeout           = 30 * time.Minute
	DefaultStartupLimit      = runner.DefaultStartupLimit
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

// Over returns s over the settings of a configuration's session(...):
// what s sets wins (flags over the file), the rest comes from c.
func (s Settings) Over(c interp.SessionSettings) Settings {
	if s.IdlePolicy == "" {
		s.IdlePolicy = IdlePolicy(c.IdlePolicy)
	}
	if s.PausedLifetime == 0 {
		s.PausedLifetime = c.PausedLifetime
	}
	if s.InactivityLimit == 0 {
		s.InactivityLimit = c.InactivityLimit
	}
	if s.Timeout == 0 {
		s.Timeout = c.Timeout
	}
	return s
}

// Normalize fills in defaults, checks the values and caps the paused
// lifetime (asking for more gets the cap).
func (s Settings) Normalize() (Settings, error) {
	d := DefaultSettings()
	if s.IdlePolicy == "" {
		s.IdlePolicy = d.IdlePolicy
	}
	if s.IdlePolicy != PolicyPause && s.IdlePolicy != PolicyEnd {
		return s, fmt.Errorf("idle policy: want pause or end, got %q", s.IdlePolicy)
	}
	if s.PausedLifetime == 0 {
		s.PausedLifetime = d.PausedLifetime
	}
	if s.InactivityLimit == 0 {
		s.InactivityLimit = d.InactivityLimit
	}
	if s.Timeout == 0 {
		s.Timeout = d.Timeout
	}
	if s.StartupLimit == 0 {
		s.StartupLimit = d.StartupLimit
	}
	if s.TeardownBackoff == 0 {
		s.TeardownBackoff = d.TeardownBackoff
	}
	if s.TeardownAttempts == 0 {
		s.TeardownAttempts = d.TeardownAttempts
	}
	for name, v := range map[string]time.Duration{"paused lifetime": s.PausedLifetime, "inactivity limit": s.InactivityLimit, "timeout": s.Timeout, "startup limit": s.StartupLimit} {
		if v < 0 {
			return s, fmt.Errorf("%s: must not be negative, got %s", name, v)
		}
	}
	max, err := MaxPausedLifetime()
	if err != nil {
		return s, err
	}
	if s.PausedLifetime > max {
		s.PausedLifetime = max
	}
	return s, nil
}
