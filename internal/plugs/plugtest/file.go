// Package plugtest runs golden-file tests of plugs (blaise-agent test): a
// test file scripts the client and the agent of a session, the real chain
// runs on a temporary local host, and what happened is compared with the
// file's golden sections.
package plugtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Ext is the extension of test files.
const Ext = ".blaisetest"

// TestName is the name of the test in the file at path: its base name
// without Ext.
func TestName(path string) string { return strings.TrimSuffix(filepath.Base(path), Ext) }

// A File is a parsed test file.
type File struct {
	Path    string // as found
	Dir     string // the absolute directory of the file
	Name    string // the base name without Ext
	Archive *txtar.Archive
	Data    []byte // the file's bytes, for line numbers

	Config string            // absolute path of the configuration
	Inline map[string][]byte // configuration and plug files of the test, by relative path
	Env    []string          // KEY=VALUE lines of the env section
	Seed   map[string][]byte // files to seed in the host workspace, by relative path
	Setup  []byte            // the setup script, run by sh in the workspace before run 1
	Runs   []*Run
	Want   map[string][]byte // golden sections, by name
	Masks  []Mask            // #mask directives, in order
	// Fails are the numbers of the runs the test expects to fail (#fails):
	// the goldens of a new test whose run fails are written only then.
	Fails map[int]bool
	// Persisted is the persisted state stored before run 1, by plug id,
	// as the JSON of persisted/ID sections: what an older version of a
	// plug stored, for its on_migrate.
	Persisted map[string][]byte
}

// A Mask replaces every match of Re in what a test produced with $Name:
// the way to keep a varying part of a golden line (a duration, a made-up
// name) out of the comparison.
type Mask struct {
	Name string
	Re   *regexp.Regexp
}

// A Run is the script of one run: the client's actions, each with the
// agent's turn when it is a prompt.
type Run struct {
	Number  int
	Line    int // of the section's first line
	Actions []Action
	// Config is the configuration this run and the next ones use, from
	// a #config line of the run: a .star section of the test, or a path
	// relative to the test file; "" keeps the one before.
	Config string
}

// An Action is one line of a run's script.
type Action struct {
	Line int
	Verb string // prompt, cancel, answer, stop, end, do, fork
	Arg  string
	// Turn is the agent's script for a prompt (the prompt language of the
	// demo agent); "" runs the prompt's own text.
	Turn string
}

// Crashes reports whether the agent's turn of a prompt ends the agent
// (/exit): the run then ends by itself.
func (a Action) Crashes() bool {
	turn := a.Turn
	if turn == "" {
		turn = a.Arg
	}
	for _, l := range strings.Split(turn, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "/exit" {
			return true
		}
	}
	return false
}

// ErrorAt is a mistake in a test file, with its place.
type ErrorAt struct {
	File string
	Line int
	Msg  string
}

func (e *ErrorAt) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

var (
	runSection  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^run([1-9][0-9]*)$`) })
	wantSection = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^want/run([1-9][0-9]*)/(` + strings.Join(Kinds, "|") + `)$`)
	})
	directive = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#([a-z-]+):\s*(.*?)\s*$`) })
	envLine   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`) })
	maskLine  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(.+)$`) })
)

// placeholders are the names the normalisation of every test uses; a mask
// may not take one.
var placeholders = []string{"WORK", "SESSION", "BLAISE_AGENT", "CONFIG", "TESTDIR", "TIME"}

// Kinds are the golden sections of a run, in the order they are written.
var Kinds = []string{"client", "transcript", "log", "host", "outputs", "pause", "teardown", "persisted", "action"}

// Parse reads and checks the test file at path.
func Parse(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	f := &File{
		Path:    path,
		Dir:     dir,
		Name:    TestName(path),
		Archive: txtar.Parse(data),
		Data:    data,
		Inline:  map[string][]byte{},
		Seed:    map[string][]byte{},
		Want:    map[string][]byte{},
		Fails:   map[int]bool{},

		Persisted: map[string][]byte{},
	}
	config, failsLine, err := f.parseDirectives()
	if err != nil {
		return nil, err
	}
	runs, err := f.parseSections()
	if err != nil {
		return nil, err
	}
	if err := f.checkRuns(runs, failsLine); err != nil {
		return nil, err
	}
	switch {
	case config != "" && f.Inline["blaise.star"] != nil:
		return nil, f.errAt(1, "#config names a configuration, and the test has its own blaise.star: keep one")
	case config != "":
		f.Config = filepath.Join(dir, config)
	case f.Inline["blaise.star"] != nil:
		// Written to the work directory when the test runs.
	default:
		f.Config = filepath.Join(dir, "blaise.star")
	}
	return f, nil
}

// errAt is a mistake at line of the file.
func (f *File) errAt(line int, format string, args ...any) error {
	return &ErrorAt{File: f.Path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// parseDirectives reads the #config, #mask and #fails lines of the file's
// comment: config is #config's path, failsLine the line of #fails.
func (f *File) parseDirectives() (config string, failsLine int, err error) {
	for i, line := range strings.Split(string(f.Archive.Comment), "\n") {
		m := directive().FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch m[1] {
		case "config":
			config = m[2]
		case "mask":
			mask, err := parseMask(m[2])
			if err != nil {
				return "", 0, f.errAt(i+1, "#mask: %v", err)
			}
			f.Masks = append(f.Masks, mask)
		case "fails":
			failsLine = i + 1
			for _, name := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ' ' || r == ',' }) {
				sub := runSection().FindStringSubmatch(name)
				if sub == nil {
					return "", 0, f.errAt(i+1, "#fails: want the runs that fail, as run1 run2 …, got %q", name)
				}
				n, _ := strconv.Atoi(sub[1])
				f.Fails[n] = true
			}
			if len(f.Fails) == 0 {
				return "", 0, f.errAt(i+1, "#fails: name the runs that fail, as run1 run2 …")
			}
		default:
			return "", 0, f.errAt(i+1, "unknown directive #%s (want #config, #mask or #fails)", m[1])
		}
	}
	return config, failsLine, nil
}

// parseSections reads the file's sections; runs are the runN sections by N.
func (f *File) parseSections() (runs map[int]*Run, err error) {
	runs = map[int]*Run{}
	for _, s := range f.Archive.Files {
		line := f.SectionLine(s.Name)
		switch name := s.Name; {
		case wantSection().MatchString(name):
			f.Want[name] = s.Data
		case strings.HasPrefix(name, "want/"):
			return nil, f.errAt(line, "unknown golden section %q (want want/runN/KIND, KIND one of %s)", name, strings.Join(Kinds, ", "))
		case runSection().MatchString(name):
			n, _ := strconv.Atoi(runSection().FindStringSubmatch(name)[1])
			r, err := parseRun(f.Path, n, line, s.Data)
			if err != nil {
				return nil, err
			}
			runs[n] = r
		case name == "env":
			for i, l := range strings.Split(string(s.Data), "\n") {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if !envLine().MatchString(l) {
					return nil, f.errAt(line+i, "env: want NAME=VALUE, got %q", l)
				}
				f.Env = append(f.Env, l)
			}
		case name == "setup":
			f.Setup = s.Data
		case strings.HasPrefix(name, "persisted/"):
			id := strings.TrimPrefix(name, "persisted/")
			if err := lifecycle.CheckID("plug", id); err != nil {
				return nil, f.errAt(line, "%s: %v", name, err)
			}
			if !json.Valid(s.Data) {
				return nil, f.errAt(line, "%s: want the JSON value the plug stored, got %q", name, strings.TrimSpace(string(s.Data)))
			}
			f.Persisted[id] = bytes.TrimSpace(s.Data)
		case strings.HasPrefix(name, "files/"):
			rel, err := relPath(strings.TrimPrefix(name, "files/"))
			if err != nil {
				return nil, f.errAt(line, "%s: %v", name, err)
			}
			f.Seed[rel] = s.Data
		case strings.HasSuffix(name, ".star"):
			rel, err := relPath(name)
			if err != nil {
				return nil, f.errAt(line, "%s: %v", name, err)
			}
			f.Inline[rel] = s.Data
		default:
			return nil, f.errAt(line, "unknown section %q (want env, setup, files/PATH, persisted/ID, a .star file, runN or want/runN/KIND)", name)
		}
	}
	return runs, nil
}

// checkRuns sets f.Runs from runs, checking their numbers, and the runs
// #fails (at failsLine) and the golden sections name.
func (f *File) checkRuns(runs map[int]*Run, failsLine int) error {
	for n := 1; n <= len(runs); n++ {
		r, ok := runs[n]
		if !ok {
			// Said at the header of the run after the gap, the line
			// before its first.
			after := n + 1
			for runs[after] == nil {
				after++
			}
			return f.errAt(runs[after].Line-1, "runs must be numbered run1, run2, … without gaps: run%d is missing before run%d", n, after)
		}
		f.Runs = append(f.Runs, r)
	}
	for _, r := range f.Runs[:max(len(f.Runs)-1, 0)] {
		if len(r.Actions) > 0 && leadingDos(r.Actions) == len(r.Actions) {
			// Action runs are not runs of the session: the numbers of
			// the runs after it would not be the session's.
			return f.errAt(r.Line, "run%d has only do lines: only the last run may; put them at the start of the next run", r.Number)
		}
	}
	if len(f.Runs) == 0 {
		return f.errAt(1, "no run: add a run1 section")
	}
	for n := range f.Fails {
		if n > len(f.Runs) {
			return f.errAt(failsLine, "#fails: the test has no run%d", n)
		}
	}
	for name := range f.Want {
		n, _ := strconv.Atoi(wantSection().FindStringSubmatch(name)[1])
		if n > len(f.Runs) {
			return f.errAt(f.SectionLine(name), "%s: the test has no run%d", name, n)
		}
	}
	return nil
}

// parseMask reads the NAME=REGEXP of a #mask directive.
func parseMask(arg string) (Mask, error) {
	m := maskLine().FindStringSubmatch(arg)
	if m == nil {
		return Mask{}, fmt.Errorf("want NAME=REGEXP, NAME in capitals, got %q", arg)
	}
	if slices.Contains(placeholders, m[1]) {
		return Mask{}, fmt.Errorf("$%s is taken by every test (%s); choose another name", m[1], strings.Join(placeholders, ", "))
	}
	re, err := regexp.Compile(m[2])
	if err != nil {
		return Mask{}, fmt.Errorf("%s: %v", m[1], err)
	}
	return Mask{Name: m[1], Re: re}, nil
}

// relPath checks that p names a file below a directory.
func relPath(p string) (string, error) {
	c := filepath.Clean(p)
	if p == "" || filepath.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("want a relative path inside the directory")
	}
	return c, nil
}

// parseRun reads the script of run n.
func parseRun(path string, n, first int, data []byte) (*Run, error) {
	r := &Run{Number: n, Line: first}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, raw := range lines {
		line := first + i
		if m := directive().FindStringSubmatch(raw); m != nil {
			if m[1] != "config" || m[2] == "" {
				return nil, &ErrorAt{path, line, fmt.Sprintf("unknown directive %q in a run (want #config: PATH)", raw)}
			}
			if len(r.Actions) > 0 {
				return nil, &ErrorAt{path, line, "#config comes before the run's actions: it is the configuration the run starts with"}
			}
			r.Config = m[2]
			continue
		}
		if strings.TrimSpace(raw) == "" || strings.HasPrefix(strings.TrimSpace(raw), "#") && !startsIndented(raw) {
			continue
		}
		if startsIndented(raw) {
			if len(r.Actions) == 0 || r.Actions[len(r.Actions)-1].Verb != "prompt" {
				return nil, &ErrorAt{path, line, "an indented line is the agent's turn: it must follow a prompt"}
			}
			a := &r.Actions[len(r.Actions)-1]
			a.Turn += strings.TrimSpace(raw) + "\n"
			continue
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(raw), " ")
		arg = strings.TrimSpace(arg)
		a := Action{Line: line, Verb: verb, Arg: arg}
		if err := checkAction(path, r.Actions, a, raw); err != nil {
			return nil, err
		}
		r.Actions = append(r.Actions, a)
	}
	return r, nil
}

// checkAction checks the action a of a run, on line raw, after the
// actions prev.
func checkAction(path string, prev []Action, a Action, raw string) error {
	line, verb, arg := a.Line, a.Verb, a.Arg
	bad := func(want string) error {
		return &ErrorAt{path, line, fmt.Sprintf("%s: want %s, got %q", verb, want, raw)}
	}
	switch verb {
	case "prompt":
		if arg == "" {
			return bad("prompt TEXT")
		}
	case "cancel":
		if len(prev) == 0 || prev[len(prev)-1].Verb != "prompt" {
			return &ErrorAt{path, line, "cancel cancels the turn of the prompt before it: put it right after a prompt"}
		}
	case "answer":
		if arg != "allow" && arg != "deny" && arg != "cancel" {
			return bad("answer allow|deny|cancel")
		}
	case "stop":
		reason, rest, _ := strings.Cut(arg, " ")
		if !slices.Contains(lifecycle.StopReasons, lifecycle.Reason(reason)) || rest != "" && rest != "may_resume" {
			return bad("stop REASON [may_resume], REASON one of " + lifecycle.ReasonList(lifecycle.StopReasons))
		}
	case "end":
		if arg != "" {
			return bad("end")
		}
	case "do":
		if arg == "" {
			return bad("do ACTION [ARGS]")
		}
		if n := len(prev); n > 0 && prev[n-1].Verb != "do" {
			return &ErrorAt{path, line, "do comes first in a run: the actions run on the paused session before the run starts"}
		}
	case "fork":
		if arg != "" {
			return bad("fork")
		}
		if len(prev) > 0 {
			return &ErrorAt{path, line, "fork is alone in its run: the fork's first run opens its session and pauses; prompt in the next run"}
		}
	default:
		return &ErrorAt{path, line, fmt.Sprintf("unknown action %q (want prompt, cancel, answer, stop, end, do or fork)", verb)}
	}
	if n := len(prev); n > 0 && prev[n-1].Verb == "fork" {
		return &ErrorAt{path, line, fmt.Sprintf("%s after fork: fork is alone in its run, which opens the fork's session and pauses; %s in the next run", verb, verb)}
	}
	if n := len(prev); n > 0 && isLast(prev[n-1].Verb) {
		return &ErrorAt{path, line, fmt.Sprintf("%s after the run was stopped: stop and end come last", verb)}
	}
	if n := len(prev); n > 0 && prev[n-1].Crashes() {
		return &ErrorAt{path, line, fmt.Sprintf("%s after the agent crashed (/exit at line %d): the run ends by itself there", verb, prev[n-1].Line)}
	}
	return nil
}

func isLast(verb string) bool { return verb == "stop" || verb == "end" }

func startsIndented(s string) bool { return s != "" && (s[0] == ' ' || s[0] == '\t') }

// SectionLine returns the line of the file where the data of section name
// begins, 1 for a section the file does not have.
func (f *File) SectionLine(name string) int {
	marker := []byte("-- " + name + " --")
	line := 1
	for _, l := range bytes.Split(f.Data, []byte("\n")) {
		if bytes.Equal(bytes.TrimSpace(l), marker) {
			return line + 1
		}
		line++
	}
	return 1
}
