package sessionview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
)

// Actions writes, after Show, the summary of the session's changes a plug
// reported and the actions the plugs of its configuration offer (cfg nil:
// cfgErr says why they are unknown), with the first line of each one's
// doc. An ended session takes no action: none are listed.
func Actions(out io.Writer, rec *lifecycle.Record, cfg *interp.Config, cfgErr error) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if rec.Changes != nil {
		fmt.Fprintf(w, "changes:\t%s\n", rec.Changes)
	}
	switch {
	case rec.State == lifecycle.Ended:
	case cfgErr != nil:
		fmt.Fprintf(w, "actions:\tunknown: %s\n", firstLine(cfgErr.Error()))
	case cfg != nil:
		names := cfg.ActionNames()
		for i, a := range cfg.Actions() {
			key := ""
			if i == 0 {
				key = "actions:"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", key, names[i], firstSentence(a.Args.Doc()))
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "\t(blaise-agent sessions do %s ACTION [--ARG VALUE …])\n", rec.ID)
		}
	}
	return w.Flush()
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
