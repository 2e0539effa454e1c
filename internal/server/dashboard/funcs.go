package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

var funcs = template.FuncMap{
	"human":    human,
	"policy":   func(p lifecycle.IdlePolicy) string { return policyText[p] },
	"endable":  endable,
	"orphaned": orphaned,
	"forkable": forkable,
	"when":     when,
	"ago":      ago,
	"lastRun":  lastRun,
	"waits":    waits,
	// The conversation's.
	"markdown":    markdown,
	"contentText": client.ContentText,
	"diff":        lineDiff,
	"duration":    func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
	"join":        strings.Join,
	// tab: the views of a session as tabs, the one shown marked.
	"tab":  func(id, shown string) struct{ ID, Shown string } { return struct{ ID, Shown string }{id, shown} },
	"runs": sessionview.Runs,
}

// endable: a session End applies to.
func endable(r *lifecycle.Record) bool {
	return r.State == lifecycle.Active || r.State == lifecycle.Paused
}

// orphaned: a session Resolve applies to.
func orphaned(r *lifecycle.Record) bool { return r.State == lifecycle.Orphaned }

// waits says why a session waits for a person, "" when it does not: a
// permission request of the dashboard's client waits (asking), its
// teardown gave up (orphaned), or its last run failed and it rests.
func waits(r *lifecycle.Record, asking bool) string {
	switch {
	case asking:
		return "a permission request waits on its page"
	case orphaned(r):
		return "clean up what its plugs left, then resolve it"
	case r.State == lifecycle.Paused && r.Pause != nil && r.Pause.Reason == lifecycle.Failed:
		return "its last run failed"
	}
	return ""
}

// when says a time as the pages show it; "" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// ago says t relative to now ("3 min ago", "in 2 days") in a <time>
// element whose title, shown on hover, is the exact time (UTC); "" for
// none. It is said in whole minutes at least, so that a list rendered
// again changes (its version, which its refresh compares) at most once a
// minute for it.
func ago(now, t time.Time) template.HTML {
	if t.IsZero() {
		return ""
	}
	t = t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`, t.Format(time.RFC3339), t.Format(time.DateTime+" UTC"), relative(t.Sub(now))))
}

// relative says d, the time from now to a moment, in words.
func relative(d time.Duration) string {
	past := d <= 0
	if past {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		if past {
			return "just now"
		}
		return "in under a minute"
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d/time.Hour))
	default:
		s = plural(int(d/(24*time.Hour)), "day")
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

// lastRun says how long the session's last run took, or since when it
// runs; "" when its history does not say (a record older than history).
func lastRun(now time.Time, r *lifecycle.Record) template.HTML {
	if len(r.History) == 0 {
		return ""
	}
	run := r.History[len(r.History)-1]
	switch {
	case run.Started.IsZero():
		return ""
	case run.Ended.IsZero() && r.State == lifecycle.Active:
		return "running since " + ago(now, run.Started)
	case run.Ended.IsZero():
		return ""
	}
	return template.HTML("last run took " + template.HTMLEscapeString(run.Ended.Sub(run.Started).Round(time.Second).String()))
}

// human says a duration the way the settings page offers it.
func human(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return plural(int(d/(24*time.Hour)), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return d.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// policyText explains each idle policy on the settings page.
var policyText = map[lifecycle.IdlePolicy]string{
	lifecycle.PolicyPause: "pause it: it resumes on the next prompt",
	lifecycle.PolicyEnd:   "end it",
}
