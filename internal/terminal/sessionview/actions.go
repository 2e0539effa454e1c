package sessionview

import (
	"fmt"
	"io"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/interp"
)

// Actions are the lines Show ends with (its more), in its columns: the
// summary of the session's changes a plug reported and the actions the
// plugs of its configuration offer (cfg nil: cfgErr says why they are
// unknown), with the first line of each one's doc. An ended session takes
// no action: none are listed.
func Actions(rec *lifecycle.Record, cfg *interp.Config, cfgErr error) func(io.Writer) {
	var list []api.Action
	if cfg != nil {
		names := cfg.ActionNames()
		for i, a := range cfg.Actions() {
			list = append(list, api.Action{Name: names[i], Doc: a.Args.Doc()})
		}
	}
	return func(w io.Writer) { writeActions(w, rec, list, cfgErr, "") }
}

// ServerActions is Actions for a session of the server at URL server,
// with the actions the server listed (or listErr, why it could not).
func ServerActions(rec *lifecycle.Record, list []api.Action, listErr error, server string) func(io.Writer) {
	return func(w io.Writer) { writeActions(w, rec, list, listErr, "--server "+server+" ") }
}

// writeActions writes the lines of Actions into w, Show's tabwriter.
func writeActions(w io.Writer, rec *lifecycle.Record, list []api.Action, listErr error, flags string) {
	if rec.Changes != nil {
		fmt.Fprintf(w, "changes:\t%s\n", rec.Changes)
	}
	switch {
	case rec.State == lifecycle.Ended:
	case listErr != nil:
		fmt.Fprintf(w, "actions:\tunknown: %s\n", firstLine(listErr.Error()))
	default:
		for i, a := range list {
			key := ""
			if i == 0 {
				key = "actions:"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", key, a.Name, firstSentence(a.Doc))
		}
		if len(list) > 0 {
			fmt.Fprintf(w, "\t(blaise-agent sessions do %s%s ACTION [--ARG VALUE …])\n", flags, rec.ID)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// firstSentence is what a listing shows of a doc.
func firstSentence(s string) string {
	s = firstLine(s)
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
