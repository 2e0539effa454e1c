package plugtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
	"github.com/blaiseagent/blaise-agent/internal/support/walk"
)

// Options configure a test run.
type Options struct {
	Self   string // the blaise-agent executable
	Update bool   // rewrite the golden sections with what the tests produced
	CI     bool   // a missing golden section fails instead of being added
}

// Outcome is the result of one test.
type Outcome struct {
	Name     string
	File     string
	Failures []Failure
	Added    []string // golden sections written because they were missing
	Updated  []string // golden sections rewritten by Update
	Removed  []string // golden sections that nothing produced, removed by Update
	Accept   string   // the command that accepts what the test produced
}

// Passed reports whether the test passed.
func (o *Outcome) Passed() bool { return len(o.Failures) == 0 }

// Failure is one golden section that does not hold, or an error of the test.
type Failure struct {
	Section string // "" for an error of the test itself
	Line    int    // of the section in the file
	Message string
	Diff    string // -want +got
}

// Find lists the test files under paths (files or directories, searched
// recursively; a trailing "/..." is allowed), sorted. Directories whose
// names begin with "." and node_modules are skipped.
func Find(paths []string) ([]string, error) { return walk.Files(paths, Ext) }

// Test runs the test file f and compares what it produced with its golden
// sections, rewriting them as opts says. The error is a test that could
// not run: a *LoadError for a configuration or plug that does not load.
func Test(ctx context.Context, f *File, opts Options) (*Outcome, error) {
	o := &Outcome{Name: f.Name, File: f.Path, Accept: fmt.Sprintf("blaise-agent test --update --run '^%s$' %s", regexp.QuoteMeta(f.Name), f.Path)}
	got, err := Execute(ctx, f, opts.Self)
	if err != nil {
		return o, err
	}
	changed := false
	for _, name := range sectionNames(len(f.Runs)) {
		want, hasWant := f.Want[name]
		g, hasGot := got[name]
		line := f.SectionLine(name)
		switch {
		case hasWant && hasGot && bytes.Equal(want, g):
		case opts.Update && hasWant && hasGot:
			o.Updated, changed = append(o.Updated, name), true
		case opts.Update && hasWant:
			o.Removed, changed = append(o.Removed, name), true
		case opts.Update && hasGot:
			o.Added, changed = append(o.Added, name), true
		case hasWant && !hasGot:
			o.Failures = append(o.Failures, Failure{Section: name, Line: line, Message: name + ": nothing produced it", Diff: string(diff.Diff("want", want, "got", nil))})
		case hasWant:
			o.Failures = append(o.Failures, Failure{Section: name, Line: line, Message: name + " differs (-want +got)", Diff: string(diff.Diff("want", want, "got", g))})
		case hasGot && opts.CI:
			o.Failures = append(o.Failures, Failure{Section: name, Line: line, Message: name + ": no golden section (CI is set, so it is not added)", Diff: string(diff.Diff("want", nil, "got", g))})
		case hasGot:
			o.Added, changed = append(o.Added, name), true
		}
	}
	if wrong := failuresAsWritten(f, got); len(wrong) > 0 {
		// Goldens first written from a run that failed would make the
		// failure what the test expects: nothing is written.
		o.Failures = append(wrong, o.Failures...)
		o.Added, o.Updated, o.Removed, o.Accept = nil, nil, nil, ""
		return o, nil
	}
	if failed := unexpectedFailures(f, got); len(failed) > 0 && !o.Passed() {
		// The diffs follow from the failure: show it first, and no
		// --update, which would only make the failure the golden.
		o.Failures = append(failed, o.Failures...)
		o.Accept = ""
	}
	if !changed {
		return o, nil
	}
	a := &txtar.Archive{Comment: f.Archive.Comment}
	for _, s := range f.Archive.Files {
		if !wantSection().MatchString(s.Name) {
			a.Files = append(a.Files, s)
		}
	}
	for _, name := range sectionNames(len(f.Runs)) {
		data, ok := f.Want[name]
		if slices.Contains(o.Updated, name) || slices.Contains(o.Added, name) || slices.Contains(o.Removed, name) {
			data, ok = got[name]
		}
		if ok {
			a.Files = append(a.Files, txtar.File{Name: name, Data: data})
		}
	}
	return o, writeFileKeepMode(f.Path, txtar.Format(a))
}

// failedPause begins the pause of a run that failed.
var failedPause = []byte("reason: " + lifecycle.Failed + "\n")

// unexpectedFailures returns a failure for each run that failed where its
// golden pause says it should not have, with the run's error.
func unexpectedFailures(f *File, got Got) []Failure {
	var out []Failure
	for _, r := range f.Runs {
		name := fmt.Sprintf("want/run%d/pause", r.Number)
		if bytes.HasPrefix(got[name], failedPause) && !bytes.HasPrefix(f.Want[name], failedPause) {
			out = append(out, Failure{Line: r.Line, Message: runFailed(f, r, got[name])})
		}
	}
	return out
}

// failuresAsWritten returns a failure for each run that failed while the
// test has no golden pause of it yet, unless #fails names the run, and for
// each run #fails names that did not fail.
func failuresAsWritten(f *File, got Got) []Failure {
	var out []Failure
	for _, r := range f.Runs {
		name := fmt.Sprintf("want/run%d/pause", r.Number)
		pause := got[name]
		failed := bytes.HasPrefix(pause, failedPause)
		switch {
		case failed && !f.Fails[r.Number] && f.Want[name] == nil:
			out = append(out, Failure{Line: r.Line, Message: fmt.Sprintf("%s\nthe goldens are not written: they would expect the failure. Fix the run, or, if the failure is what the test checks, add a line #fails: run%d to the test's comment", runFailed(f, r, pause), r.Number)})
		case !failed && f.Fails[r.Number]:
			out = append(out, Failure{Line: r.Line, Message: fmt.Sprintf("run%d did not fail, as #fails says it does", r.Number)})
		}
	}
	return out
}

// runFailed says that run r failed, with the error of its pause.
func runFailed(f *File, r *Run, pause []byte) string {
	msg := fmt.Sprintf("run%d failed", r.Number)
	if _, e, ok := bytes.Cut(pause, []byte("\nerror: ")); ok {
		// The test's own plugs ran from $WORK/config, which is gone.
		msg += ": " + f.atSections(strings.TrimSuffix(string(e), "\n"), regexp.QuoteMeta("$WORK/config/"))
	}
	return msg
}

// sectionNames lists the golden sections of n runs in the order they are
// written.
func sectionNames(n int) []string {
	var names []string
	for i := 1; i <= n; i++ {
		for _, k := range Kinds {
			names = append(names, fmt.Sprintf("want/run%d/%s", i, k))
		}
	}
	return names
}

// writeFileKeepMode replaces the file's content, keeping its permissions.
func writeFileKeepMode(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, info.Mode().Perm(), false)
}
