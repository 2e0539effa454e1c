package plugtest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
)

// InCI reports whether the environment says this is CI (CI=true or CI=1):
// missing golden sections then fail instead of being added.
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Errored is the outcome of a test that could not run.
func Errored(path string, err error) *Outcome {
	return &Outcome{Name: TestName(path), File: path, Failures: []Failure{{Message: err.Error()}}}
}

// Report collects outcomes and writes them.
type Report struct {
	Verbose  bool
	Outcomes []*Outcome
}

// Add adds an outcome.
func (r *Report) Add(o *Outcome) { r.Outcomes = append(r.Outcomes, o) }

// Failed counts the tests that failed.
func (r *Report) Failed() int {
	n := 0
	for _, o := range r.Outcomes {
		if !o.Passed() {
			n++
		}
	}
	return n
}

// Write writes the report in format text, json or junit.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		return r.json(w)
	case "junit":
		return r.junit(w)
	}
	return r.text(w)
}

func (r *Report) text(w io.Writer) error {
	var b strings.Builder
	for _, o := range r.Outcomes {
		if o.Passed() && !r.Verbose && len(o.Added)+len(o.Updated)+len(o.Removed) == 0 {
			continue
		}
		status := "PASS"
		if !o.Passed() {
			status = "FAIL"
		}
		fmt.Fprintf(&b, "--- %s: %s (%s)\n", status, o.Name, o.File)
		for _, f := range o.Failures {
			if f.Line == 0 {
				fmt.Fprintf(&b, "    %s\n", indent(f.Message, "    "))
				continue
			}
			fmt.Fprintf(&b, "    %s:%d: %s\n", o.File, f.Line, indent(f.Message, "    "))
			if f.Diff != "" {
				fmt.Fprintf(&b, "        %s\n", indent(strings.TrimSuffix(f.Diff, "\n"), "        "))
			}
		}
		for _, s := range o.Added {
			fmt.Fprintf(&b, "    added %s\n", s)
		}
		for _, s := range o.Updated {
			fmt.Fprintf(&b, "    updated %s\n", s)
		}
		for _, s := range o.Removed {
			fmt.Fprintf(&b, "    removed %s\n", s)
		}
		if !o.Passed() && o.Accept != "" && o.Failures[0].Section != "" {
			fmt.Fprintf(&b, "    accept the change with: %s\n", o.Accept)
		}
	}
	switch n := r.Failed(); {
	case len(r.Outcomes) == 0:
		b.WriteString("FAIL: no test matched\n")
	case n > 0:
		fmt.Fprintf(&b, "FAIL: %d of %d tests failed\n", n, len(r.Outcomes))
	case n == 0 && len(r.Outcomes) == 1:
		b.WriteString("ok: 1 test passed\n")
	default:
		fmt.Fprintf(&b, "ok: %d tests passed\n", len(r.Outcomes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s, prefix string) string { return strings.ReplaceAll(s, "\n", "\n"+prefix) }

func (r *Report) json(w io.Writer) error {
	type failure struct {
		Section string `json:"section,omitempty"`
		Line    int    `json:"line,omitempty"`
		Message string `json:"message"`
		Diff    string `json:"diff,omitempty"`
	}
	type test struct {
		Name     string    `json:"name"`
		File     string    `json:"file"`
		Passed   bool      `json:"passed"`
		Failures []failure `json:"failures,omitempty"`
		Added    []string  `json:"added,omitempty"`
		Updated  []string  `json:"updated,omitempty"`
		Removed  []string  `json:"removed,omitempty"`
		Accept   string    `json:"accept,omitempty"`
	}
	out := struct {
		Tests  []test `json:"tests"`
		Passed int    `json:"passed"`
		Failed int    `json:"failed"`
	}{Tests: []test{}, Failed: r.Failed(), Passed: len(r.Outcomes) - r.Failed()}
	for _, o := range r.Outcomes {
		t := test{Name: o.Name, File: o.File, Passed: o.Passed(), Added: o.Added, Updated: o.Updated, Removed: o.Removed}
		for _, f := range o.Failures {
			t.Failures = append(t.Failures, failure(f))
		}
		if !o.Passed() {
			t.Accept = o.Accept
		}
		out.Tests = append(out.Tests, t)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func (r *Report) junit(w io.Writer) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Failure   *failure `xml:"failure,omitempty"`
	}
	type suite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	s := suite{Name: "blaise-agent test", Tests: len(r.Outcomes), Failures: r.Failed()}
	for _, o := range r.Outcomes {
		c := testcase{Name: o.Name, Classname: o.File}
		if !o.Passed() {
			var text strings.Builder
			for _, f := range o.Failures {
				if f.Line != 0 {
					fmt.Fprintf(&text, "%s:%d: ", o.File, f.Line)
				}
				text.WriteString(f.Message + "\n" + f.Diff)
			}
			if o.Accept != "" && o.Failures[0].Section != "" {
				text.WriteString("accept the change with: " + o.Accept + "\n")
			}
			c.Failure = &failure{Message: o.Failures[0].Message, Text: text.String()}
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
