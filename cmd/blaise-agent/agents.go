package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
)

// ServerFlags reach a Blaise server as a client.
type ServerFlags struct {
	Server string `help:"The Blaise server's URL." env:"BLAISE_SERVER" placeholder:"URL"`
	Token  string `help:"An API token of the server (bla_…); better in $BLAISE_TOKEN than on the command line." env:"BLAISE_TOKEN" placeholder:"TOKEN"`
}

func (f ServerFlags) client() *apiclient.Client {
	return &apiclient.Client{URL: f.Server, Token: f.Token}
}

// AgentsCmd is `blaise-agent agents`: a server's named agents.
type AgentsCmd struct {
	List   AgentsListCmd   `cmd:"" default:"withargs" help:"List the agents."`
	Create AgentsCreateCmd `cmd:"" help:"Create an agent."`
	Set    AgentsSetCmd    `cmd:"" help:"Change an agent's settings."`
	Delete AgentsDeleteCmd `cmd:"" help:"Delete an agent."`
}

type AgentsListCmd struct {
	ServerFlags
	JSON bool `help:"Print JSON."`
}

func (c *AgentsListCmd) Run() error {
	agents, err := c.client().Agents(context.Background())
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(agents)
	}
	return apiclient.PrintAgents(os.Stdout, agents)
}

// AgentSettingsFlags are an agent's settings (L1).
type AgentSettingsFlags struct {
	Config           string        `help:"Where the agent's blaise.star is, for people and runners."`
	IdlePolicy       string        `help:"What an idle session does: pause or end." enum:",pause,end" default:""`
	PausedLifetime   time.Duration `help:"How long a paused session waits before it is torn down (capped by SESSION_MAX_PAUSED_LIFETIME_MS)."`
	InactivityLimit  time.Duration `help:"How long a session may go without a message before it is idle."`
	Timeout          time.Duration `help:"The longest one run may take."`
	TeardownBackoff  time.Duration `help:"How long after a failed teardown it is tried again, doubling each time."`
	TeardownAttempts int           `help:"How many times a teardown is tried before the session is orphaned."`
}

func (f AgentSettingsFlags) agent(name string) api.AgentJSON {
	a := api.AgentJSON{Name: name, Config: f.Config, IdlePolicy: f.IdlePolicy, TeardownAttempts: f.TeardownAttempts}
	for _, d := range []struct {
		in  time.Duration
		out *string
	}{{f.PausedLifetime, &a.PausedLifetime}, {f.InactivityLimit, &a.InactivityLimit}, {f.Timeout, &a.Timeout}, {f.TeardownBackoff, &a.TeardownBackoff}} {
		if d.in != 0 {
			*d.out = d.in.String()
		}
	}
	return a
}

type AgentsCreateCmd struct {
	ServerFlags
	Name string `arg:""`
	AgentSettingsFlags
}

func (c *AgentsCreateCmd) Run() error {
	a, err := c.client().CreateAgent(context.Background(), c.agent(c.Name))
	if err != nil {
		return err
	}
	return apiclient.PrintAgents(os.Stdout, []api.AgentJSON{*a})
}

type AgentsSetCmd struct {
	ServerFlags
	Name string `arg:""`
	AgentSettingsFlags
}

func (c *AgentsSetCmd) Run() error {
	a, err := c.client().UpdateAgent(context.Background(), c.agent(c.Name))
	if err != nil {
		return err
	}
	return apiclient.PrintAgents(os.Stdout, []api.AgentJSON{*a})
}

type AgentsDeleteCmd struct {
	ServerFlags
	Name string `arg:""`
}

func (c *AgentsDeleteCmd) Run() error {
	ctx := context.Background()
	// Its sessions stay, and nothing continues or ends them until an agent
	// of the name is there again: said before they are left so.
	if recs, err := c.client().AllSessions(ctx, apiclient.ListOptions{Agent: c.Name}); err == nil {
		var open []string
		for _, r := range recs {
			if r.State != lifecycle.Ended {
				open = append(open, r.ID+" ("+string(r.State)+")")
			}
		}
		if len(open) > 0 {
			fmt.Fprintf(os.Stderr, "warning: agent %s has %d sessions not ended: %s; they stay, and cannot be continued or ended until an agent %s exists again (end them first: blaise-agent sessions end ID --server %s)\n",
				c.Name, len(open), strings.Join(open, ", "), c.Name, c.Server)
		}
	}
	return c.client().DeleteAgent(ctx, c.Name)
}
