package lifecycle

import (
	"strings"
	"testing"
	"time"
)

func TestL1_SettingsDefaultsAndCap(t *testing.T) {
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "")
	s, err := NormalizeSettings(Settings{})
	if err != nil || s != DefaultSettings() {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	if s.PausedLifetime != 24*time.Hour || s.InactivityLimit != 5*time.Minute || s.Timeout != 30*time.Minute || s.IdlePolicy != PolicyPause {
		t.Fatalf("seed defaults: %+v", s)
	}
	s, _ = NormalizeSettings(Settings{PausedLifetime: 30 * 24 * time.Hour})
	if s.PausedLifetime != 7*24*time.Hour {
		t.Fatalf("default cap: %s", s.PausedLifetime)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "60000")
	s, _ = NormalizeSettings(Settings{PausedLifetime: time.Hour})
	if s.PausedLifetime != time.Minute {
		t.Fatalf("operator cap: %s", s.PausedLifetime)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "soon")
	if _, err := NormalizeSettings(Settings{}); err == nil || !strings.Contains(err.Error(), `SESSION_MAX_PAUSED_LIFETIME_MS: want a positive number of milliseconds, got "soon"`) {
		t.Fatalf("bad cap: %v", err)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "")
	if _, err := NormalizeSettings(Settings{IdlePolicy: "sleep"}); err == nil || !strings.Contains(err.Error(), `idle policy: want pause or end, got "sleep"`) {
		t.Fatalf("bad policy: %v", err)
	}
	if _, err := NormalizeSettings(Settings{Timeout: -time.Second}); err == nil {
		t.Fatal("a negative timeout passed")
	}
}
