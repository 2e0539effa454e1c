package docs_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/plugs/plugdoc"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/blaiseagent/blaise-agent/stdlib"
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
	refs, err := plugdoc.Load(chain.NewLoader(log.New(io.Discard)), nil)
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

// TestStdlibReferenceHasEveryPlug: `blaise-agent doc` (and so stdlib.md's
// reference) lists every plug embedded in the binary: each file of the
// standard library that loads as a plug on its own, with a loader of its
// own, is there; the modules are not.
func TestStdlibReferenceHasEveryPlug(t *testing.T) {
	files, err := fs.Glob(stdlib.FS, "*.star")
	if err != nil {
		t.Fatal(err)
	}
	var plugs []string
	for _, f := range files {
		ref := interp.StdlibPrefix + strings.TrimSuffix(f, ".star")
		_, err := chain.NewLoader(log.New(io.Discard)).LoadPlug(ref)
		switch {
		case err == nil:
			plugs = append(plugs, ref)
		case !errors.Is(err, interp.ErrNotAPlug):
			t.Errorf("%s alone: %v", ref, err)
		}
	}
	refs, err := plugdoc.Load(chain.NewLoader(log.New(io.Discard)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range refs {
		listed = append(listed, r.Ref)
	}
	if !slices.Equal(listed, plugs) {
		t.Errorf("blaise-agent doc lists %q; the standard library's plugs are %q (of the files %q)", listed, plugs, files)
	}
}
