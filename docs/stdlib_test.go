package docs_test

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/plugdoc"
	"github.com/blaiseagent/blaise-agent/runner"
	"github.com/charmbracelet/log"
	"github.com/rogpeppe/go-internal/diff"
)

var update = flag.Bool("update", false, "rewrite the generated sections of the docs")

const (
	referenceBegin = "<!-- begin: blaise-agent doc --format markdown -->\n"
	referenceEnd   = "<!-- end: blaise-agent doc --format markdown -->\n"
)

// TestStdlibReference: the reference section of stdlib.md is what
// `blaise-agent doc --format markdown` prints for the standard library, so
// it never lags behind the plugs' schemas.
func TestStdlibReference(t *testing.T) {
	refs, err := plugdoc.Load(runner.NewLoader(log.New(io.Discard)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var gen bytes.Buffer
	if err := plugdoc.Write(&gen, refs, "markdown"); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("stdlib.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), referenceBegin)
	old, after, ok2 := strings.Cut(rest, referenceEnd)
	if !ok1 || !ok2 {
		t.Fatalf("stdlib.md lacks the lines %q and %q around its reference", referenceBegin, referenceEnd)
	}
	want := "\n" + gen.String() + "\n"
	if old == want {
		return
	}
	if *update {
		if err := os.WriteFile("stdlib.md", []byte(before+referenceBegin+want+referenceEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("stdlib.md's reference is not what blaise-agent doc prints (-doc +generated); go test ./docs -run TestStdlibReference -update rewrites it:\n%s", diff.Diff("stdlib.md", []byte(old), "generated", []byte(want)))
}
