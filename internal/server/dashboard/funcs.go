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
	"when":     when,
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

// when says a time as the pages show it; "" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
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
