package blaise

import (
	"strings"
	"testing"
	"time"
)

func TestL1_SettingsDefaultsAndCap(t *testing.T) {
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "")
	s, err := Settings{}.Normalize()
	if err != nil || s != DefaultSettings() {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	if s.PausedLifetime != 24*time.Hour || s.InactivityLimit != 5*time.Minute || s.Timeout != 30*time.Minute || s.IdlePolicy != PolicyPause {
		t.Fatalf("seed defaults: %+v", s)
	}
	s, _ = Settings{PausedLifetime: 30 * 24 * time.Hour}.Normalize()
	if s.PausedLifetime != 7*24*time.Hour {
		t.Fatalf("default cap: %s", s.PausedLifetime)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "60000")
	s, _ = Settings{PausedLifetime: time.Hour}.Normalize()
	if s.PausedLifetime != time.Minute {
		t.Fatalf("operator cap: %s", s.PausedLifetime)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "soon")
	if _, err := (Settings{}).Normalize(); err == nil || !strings.Contains(err.Error(), `SESSION_MAX_PAUSED_LIFETIME_MS: want a positive number of milliseconds, got "soon"`) {
		t.Fatalf("bad cap: %v", err)
	}
	t.Setenv("SESSION_MAX_PAUSED_LIFETIME_MS", "")
	if _, err := (Settings{IdlePolicy: "sleep"}).Normalize(); err == nil || !strings.Contains(err.Error(), `idle policy: want pause or end, got "sleep"`) {
		t.Fatalf("bad policy: %v", err)
	}
	if _, err := (Settings{Timeout: -time.Second}).Normalize(); err == nil {
		t.Fatal("a negative timeout passed")
	}
}

func TestL2_TeardownBackoffThenOrphaned(t *testing.T) {
	rec := &SessionRecord{Settings: Settings{TeardownBackoff: time.Second, TeardownAttempts: 3}}
	now := time.Unix(0, 0)
	ApplyPause(rec, Pause{Run: 1, Reason: "closed"}, now)
	if rec.State != TearingDown || rec.EndReason != "closed" {
		t.Fatalf("after pause: %+v", rec)
	}
	var waits []time.Duration
	for rec.State == TearingDown {
		ApplyTeardown(rec, errFake, now)
		if rec.State == TearingDown {
			waits = append(waits, rec.Teardown.NextAt.Sub(now))
		}
	}
	if rec.State != Orphaned || len(waits) != 2 || waits[0] != time.Second || waits[1] != 2*time.Second {
		t.Fatalf("state %s waits %v", rec.State, waits)
	}
}

var errFake = fakeErr("rm failed")

type fakeErr string

func (e fakeErr) Error() string { return string(e) }
