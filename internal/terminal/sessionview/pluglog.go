package sessionview

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// WritePlugLog writes a session's plug log: each run's lines under its
// heading, or, with records, the lines as stored (JSON, one a line). A
// session whose plugs logged nothing says so.
func WritePlugLog(out io.Writer, lines []lifecycle.PlugLogLine, records bool) error {
	if records {
		enc := json.NewEncoder(out)
		for i := range lines {
			if err := enc.Encode(&lines[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(lines) == 0 {
		_, err := fmt.Fprintln(out, "The plugs logged nothing with ctx.log.")
		return err
	}
	run := 0
	for _, l := range lines {
		if l.Run != run {
			run = l.Run
			if _, err := fmt.Fprintf(out, "── run %d ──\n", run); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(out, l.String()); err != nil {
			return err
		}
	}
	return nil
}
