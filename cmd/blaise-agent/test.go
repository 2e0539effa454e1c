package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/blaiseagent/blaise-agent/plugtest"
	"github.com/blaiseagent/blaise-agent/runner"
)

// TestCmd is `blaise-agent test`: golden-file tests of plugs.
type TestCmd struct {
	Paths   []string `arg:"" optional:"" help:"Test files (*.blaisetest) or directories to search for them, recursively (default: .)."`
	Filter  string   `name:"run" help:"Run only the tests whose name (the file name without .blaisetest) matches this regular expression."`
	Update  bool     `help:"Rewrite the golden sections (want/…) with what the tests produced; the rest of each file stays as it is."`
	Verbose bool     `short:"v" help:"Also list the tests that pass."`
	Format  string   `help:"Output format: text, json or junit." enum:"text,json,junit" default:"text"`
}

// exitError ends the program with its code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) ExitCode() int { return e.code }

// Run runs the tests: exit status 0 when all pass, 1 when one fails, 2 for
// a usage error or a test whose configuration or plugs do not load.
func (c *TestCmd) Run(g *Globals) error {
	usage := func(err error) error { return &exitError{2, err} }
	var filter *regexp.Regexp
	if c.Filter != "" {
		var err error
		if filter, err = regexp.Compile(c.Filter); err != nil {
			return usage(fmt.Errorf("--run: %w", err))
		}
	}
	paths, err := plugtest.Find(c.Paths)
	if err != nil {
		return usage(err)
	}
	self, err := runner.Self()
	if err != nil {
		return err
	}
	opts := plugtest.Options{Self: self, Update: c.Update, CI: plugtest.InCI()}
	// Ctrl-C ends the test running: its runs stop, its directory goes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report := &plugtest.Report{Verbose: c.Verbose}
	broken := false
	for _, p := range paths {
		if ctx.Err() != nil {
			break
		}
		if filter != nil && !filter.MatchString(plugtest.TestName(p)) {
			continue
		}
		f, err := plugtest.Parse(p)
		var o *plugtest.Outcome
		if err == nil {
			o, err = plugtest.Test(ctx, f, opts)
		}
		if err != nil {
			var le *plugtest.LoadError
			var at *plugtest.ErrorAt
			broken = broken || errors.As(err, &le) || errors.As(err, &at)
			o = plugtest.Errored(p, err)
		}
		report.Add(o)
	}
	if err := report.Write(os.Stdout, c.Format); err != nil {
		return err
	}
	switch {
	case broken:
		return &exitError{2, errors.New("a test could not run")}
	case report.Failed() > 0:
		return &exitError{1, fmt.Errorf("%d of %d tests failed", report.Failed(), len(report.Outcomes))}
	case len(report.Outcomes) == 0:
		fmt.Fprintln(os.Stderr, "blaise-agent test: no test matched")
	}
	return nil
}
