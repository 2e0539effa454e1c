package apiclient

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// PrintAgents prints agents as a table.
func PrintAgents(w io.Writer, agents []api.AgentJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIDLE POLICY\tPAUSED LIFETIME\tINACTIVITY\tTIMEOUT\tCONFIG")
	for _, a := range agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.IdlePolicy, a.PausedLifetime, a.InactivityLimit, a.Timeout, a.Config)
	}
	return tw.Flush()
}
