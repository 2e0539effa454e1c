package plugtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
)

// A Suite is what `blaise-agent test` runs: the test files found under
// Paths whose name matches Filter, Jobs at a time.
type Suite struct {
	Paths   []string
	Filter  string // a regular expression; "" runs every test
	Jobs    int    // 0: one per CPU
	Update  bool   // rewrite the golden sections
	Verbose bool   // list the tests that pass too
	Format  string // of the report: text, json or junit
	Self    string // the blaise-agent binary the sessions run
	Out     io.Writer
}

// Run runs the tests and writes the report to Out. Its error has the exit
// status: 1 when one fails or none matched, 2 for a usage
// error or a test whose configuration or plugs do not load. When ctx ends,
// the tests running stop and those not started are left out.
func (s Suite) Run(ctx context.Context) error {
	usage := func(err error) error { return &exitcode.Error{Code: 2, Err: err} }
	var filter *regexp.Regexp
	if s.Filter != "" {
		var err error
		if filter, err = regexp.Compile(s.Filter); err != nil {
			return usage(fmt.Errorf("--run: %w", err))
		}
	}
	if s.Jobs < 0 {
		return usage(fmt.Errorf("--jobs: want 0 or more, got %d", s.Jobs))
	}
	paths, err := Find(s.Paths)
	if err != nil {
		return usage(err)
	}
	var selected []string
	for _, p := range paths {
		if filter == nil || filter.MatchString(TestName(p)) {
			selected = append(selected, p)
		}
	}
	opts := Options{Self: s.Self, Update: s.Update, CI: InCI()}
	jobs := s.Jobs
	if jobs == 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	outcomes := make([]*Outcome, len(selected))
	unloadable := make([]bool, len(selected))
	slots := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, p := range selected {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() == nil {
				outcomes[i], unloadable[i] = runFile(ctx, p, opts)
			}
		})
	}
	wg.Wait()
	// Reported in the order of the files, however they finished.
	report := &Report{Verbose: s.Verbose}
	broken := 0
	for i, o := range outcomes {
		if o != nil {
			report.Add(o)
		}
		if unloadable[i] {
			broken++
		}
	}
	if err := report.Write(s.Out, s.Format); err != nil {
		return err
	}
	switch {
	case broken > 0:
		// The summary counts them among the failed: say which failures.
		return &exitcode.Error{Code: 2, Err: fmt.Errorf("%d of %d tests failed, %d of them could not run: a test file or plugs that do not load (above)", report.Failed(), len(report.Outcomes), broken)}
	case report.Failed() > 0:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%d of %d tests failed", report.Failed(), len(report.Outcomes))}
	case len(report.Outcomes) == 0:
		// A path or --run that selects nothing is a mistake, not a pass.
		where := cmp.Or(strings.Join(s.Paths, " "), ".")
		if filter != nil {
			return &exitcode.Error{Code: 1, Err: fmt.Errorf("no test matched: no test under %s has a name that --run %q matches", where, s.Filter)}
		}
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("no test matched: no *%s file under %s", Ext, where)}
	}
	return nil
}

// runFile parses and runs the test file at path; unloadable tells that
// the test could not run: a bad test file, or plugs that do not load.
func runFile(ctx context.Context, path string, opts Options) (o *Outcome, unloadable bool) {
	f, err := Parse(path)
	if err == nil {
		o, err = Test(ctx, f, opts)
	}
	if err != nil {
		var le *LoadError
		var at *ErrorAt
		return Errored(path, err), errors.As(err, &le) || errors.As(err, &at)
	}
	return o, false
}
