package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugtest"
)

// TestCmd is `blaise-agent test`: golden-file tests of plugs.
type TestCmd struct {
	Paths   []string `arg:"" optional:"" help:"Test files (*.blaisetest) or directories to search for them, recursively (default: .)."`
	Filter  string   `name:"run" help:"Run only the tests whose name (the file name without .blaisetest) matches this regular expression."`
	Update  bool     `help:"Rewrite the golden sections (want/…) with what the tests produced; the rest of each file stays as it is."`
	Verbose bool     `short:"v" help:"Also list the tests that pass."`
	Format  string   `help:"Output format: text, json or junit." enum:"text,json,junit" default:"text"`
	JSON    bool     `name:"json" help:"Print the results as JSON (the same as --format json)."`
	Jobs    int      `short:"j" help:"How many tests run at once (default: one per CPU)." default:"0"`
}

// Run runs the tests: exit status 0 when all pass, 1 when one fails or
// none matched, 2 for a usage error or a test whose
// configuration or plugs do not load.
func (c *TestCmd) Run(g *Globals) error {
	self, err := chain.Self()
	if err != nil {
		return err
	}
	// Ctrl-C ends the tests running: their runs stop, their directories
	// go; the tests not started yet are left out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return plugtest.Suite{
		Paths: c.Paths, Filter: c.Filter, Jobs: c.Jobs, Update: c.Update, Verbose: c.Verbose,
		Format: c.Format, Self: self, Out: os.Stdout,
	}.Run(ctx)
}

// Validate makes --json mean --format json.
func (c *TestCmd) Validate() error { return jsonFormat(c.JSON, &c.Format) }
