package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"sync"
	"syscall"

	"github.com/blaiseagent/blaise-agent/internal/exitcode"
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
	Jobs    int      `short:"j" help:"How many tests run at once (default: one per CPU)." default:"0"`
}

// Run runs the tests: exit status 0 when all pass, 1 when one fails (or,
// under CI, none matched), 2 for a usage error or a test whose
// configuration or plugs do not load.
func (c *TestCmd) Run(g *Globals) error {
	usage := func(err error) error { return &exitcode.Error{Code: 2, Err: err} }
	var filter *regexp.Regexp
	if c.Filter != "" {
		var err error
		if filter, err = regexp.Compile(c.Filter); err != nil {
			return usage(fmt.Errorf("--run: %w", err))
		}
	}
	if c.Jobs < 0 {
		return usage(fmt.Errorf("--jobs: want 0 or more, got %d", c.Jobs))
	}
	paths, err := plugtest.Find(c.Paths)
	if err != nil {
		return usage(err)
	}
	var selected []string
	for _, p := range paths {
		if filter == nil || filter.MatchString(plugtest.TestName(p)) {
			selected = append(selected, p)
		}
	}
	self, err := runner.Self()
	if err != nil {
		return err
	}
	opts := plugtest.Options{Self: self, Update: c.Update, CI: plugtest.InCI()}
	// Ctrl-C ends the tests running: their runs stop, their directories
	// go; the tests not started yet are left out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	jobs := c.Jobs
	if jobs == 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	outcomes := make([]*plugtest.Outcome, len(selected))
	unloadable := make([]bool, len(selected))
	slots := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, p := range selected {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() == nil {
				outcomes[i], unloadable[i] = runTest(ctx, p, opts)
			}
		})
	}
	wg.Wait()
	// Reported in the order of the files, however they finished.
	report := &plugtest.Report{Verbose: c.Verbose}
	broken := false
	for i, o := range outcomes {
		if o != nil {
			report.Add(o)
		}
		broken = broken || unloadable[i]
	}
	if err := report.Write(os.Stdout, c.Format); err != nil {
		return err
	}
	switch {
	case broken:
		return &exitcode.Error{Code: 2, Err: errors.New("a test could not run")}
	case report.Failed() > 0:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%d of %d tests failed", report.Failed(), len(report.Outcomes))}
	case len(report.Outcomes) == 0 && opts.CI:
		// Under CI a path or --run that selects nothing is a mistake.
		return &exitcode.Error{Code: 1, Err: errors.New("no test matched (CI=true)")}
	case len(report.Outcomes) == 0:
		fmt.Fprintln(os.Stderr, "blaise-agent test: no test matched")
	}
	return nil
}

// runTest parses and runs the test file at path; unloadable tells that
// the test could not run: a bad test file, or plugs that do not load.
func runTest(ctx context.Context, path string, opts plugtest.Options) (o *plugtest.Outcome, unloadable bool) {
	f, err := plugtest.Parse(path)
	if err == nil {
		o, err = plugtest.Test(ctx, f, opts)
	}
	if err != nil {
		var le *plugtest.LoadError
		var at *plugtest.ErrorAt
		return plugtest.Errored(path, err), errors.As(err, &le) || errors.As(err, &at)
	}
	return o, false
}
