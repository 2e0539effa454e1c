package engine

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// MaxPausedLifetime is the operator's cap, SESSION_MAX_PAUSED_LIFETIME_MS
// (default 7 days).
func MaxPausedLifetime() (time.Duration, error) {
	v := os.Getenv("SESSION_MAX_PAUSED_LIFETIME_MS")
	if v == "" {
		return lifecycle.DefaultMaxPausedLifetime, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("SESSION_MAX_PAUSED_LIFETIME_MS: want a positive number of milliseconds, got %q", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// NormalizeSettings is s.Normalize under the operator's cap.
func NormalizeSettings(s lifecycle.Settings) (lifecycle.Settings, error) {
	max, err := MaxPausedLifetime()
	if err != nil {
		return s, err
	}
	return s.Normalize(max)
}
