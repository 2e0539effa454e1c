// Package sessiongen makes the stored history of a busy server for
// benchmarks: session records as the lifecycle leaves them, most ended,
// some paused, a few being torn down or orphaned, none due for a long time.
package sessiongen

import (
	"fmt"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Records returns n sessions of agent, created one a minute up to now,
// each with a few runs of history. Out of every 100: 1 orphaned, 1 tearing
// down with its retry due in a day, 10 paused until 30 days after now, the
// others ended. Their ids start with prefix, which must make valid ids
// with 8 more digits.
func Records(n int, agent, prefix string, now time.Time) []*lifecycle.Record {
	recs := make([]*lifecycle.Record, n)
	for i := range recs {
		created := now.Add(-time.Duration(n-i) * time.Minute)
		settings := lifecycle.DefaultSettings()
		settings.PausedLifetime = 30 * 24 * time.Hour
		r := &lifecycle.Record{ID: fmt.Sprintf("%s%08d", prefix, i), Config: "/srv/agents/" + agent + "/blaise.star", Dir: "/work/" + agent,
			AgentName: agent, Owner: "bench", Runner: fmt.Sprintf("runner-%d", i%4), Created: created, Settings: settings, Resumable: true,
			Title: fmt.Sprintf("task %d: fix the flaky test in package %d", i, i%37)}
		at := created
		for run := range 1 + i%3 { // 1 to 3 runs, each paused idle
			lifecycle.BeginRun(r, []lifecycle.Kind{lifecycle.StartRun, lifecycle.ResumeRun}[min(run, 1)], at)
			at = at.Add(20 * time.Second)
			lifecycle.ApplyPause(r, lifecycle.Pause{Reason: lifecycle.Idle, MayResume: true}.Record(r.Runs, at))
		}
		switch k := i % 100; {
		case k < 10: // paused until long after the benchmark
			r.PausedAt, r.ExpiresAt = now, now.Add(settings.PausedLifetime)
		default:
			r.State, r.EndReason = lifecycle.TearingDown, lifecycle.Closed
			lifecycle.BeginRun(r, lifecycle.TeardownRun, at)
			switch k {
			case 10: // a retry due in a day
				lifecycle.ApplyTeardown(r, fmt.Errorf("docker: no such container"), now)
				r.Teardown.NextAt = now.Add(24 * time.Hour)
			case 11: // orphaned: every attempt failed
				r.Teardown.Attempts = settings.TeardownAttempts - 1
				lifecycle.ApplyTeardown(r, fmt.Errorf("docker: no such container"), at)
			default:
				lifecycle.ApplyTeardown(r, nil, at)
			}
		}
		r.Updated = at
		recs[i] = r
	}
	return recs
}
