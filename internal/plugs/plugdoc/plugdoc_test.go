package plugdoc

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blaiseagent/blaise-agent/interp"
)

func load(t *testing.T, refs ...string) []*Reference {
	t.Helper()
	l := &interp.Loader{Stdlib: fstest.MapFS{
		"greet.star": {Data: []byte("plug(name = \"blaise/greet\")\ndef on_teardown(ctx, next):\n    next()\n")},
		"lib.star":   {Data: []byte("X = 1\n")},
	}}
	got, err := Load(l, refs)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestText: every field, nested ones by their path, with its type, its
// default as Starlark writes it, or (required), and its doc.
func TestText(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, load(t, "testdata/deploy.star"), "text"); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/deploy.txt")
	if out.String() != string(want) {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestMarkdown(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, load(t, "testdata/deploy.star"), "markdown"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Reference: `testdata/deploy.star`\n\nDeploys the agent's branch | when asked.\n\n`acme/deploy`: handlers: on_session; cannot resume (resumable = False).\n",
		"| `target` | one of \"staging\", \"prod\" | (required) | Where to deploy. |\n",
		"| `repo.branch` | string | `\"main\"` |  |\n",
		"| `note` | string or None | `None` | A note for the log. |\n",
		"| persisted | type | default | description |\n| --- | --- | --- | --- |\n| `(value)` | list of string | (required) | Deployed revisions. |\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
}

// TestJSON: defaults as JSON; the fields as the text shows them.
func TestJSON(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, load(t, "testdata/deploy.star"), "json"); err != nil {
		t.Fatal(err)
	}
	var got []Reference
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "acme/deploy" || got[0].Resumable || len(got[0].Inputs) != 8 || len(got[0].Persisted) != 1 {
		t.Fatalf("got %+v", got)
	}
	retries := got[0].Inputs[4]
	if retries.Path != "retries" || string(retries.Default) != "2" || retries.Required || retries.Type != "int ≥ 0" {
		t.Errorf("retries: %+v", retries)
	}
	if note := got[0].Inputs[5]; note.Required || note.Default == nil || string(note.Default) != "null" {
		t.Errorf("note: %+v", note)
	}
}

// TestStdlibByDefault: no reference lists the standard library's plugs,
// skipping its modules.
func TestStdlibByDefault(t *testing.T) {
	got := load(t)
	if len(got) != 1 || got[0].Ref != "blaise:greet" || strings.Join(got[0].Handlers, ",") != "on_teardown" {
		t.Errorf("got %+v", got)
	}
}

// TestErrors: a reference that is not there, a module, a bad format.
func TestErrors(t *testing.T) {
	l := &interp.Loader{Stdlib: fstest.MapFS{"lib.star": {Data: []byte("X = 1\n")}}}
	for ref, want := range map[string]string{
		"blaise:nosuch":    "no plug or module blaise:nosuch in the standard library",
		"blaise:lib":       "blaise:lib:1:1: not a plug: the file never calls plug(name = ...)",
		"testdata/no.star": "cannot read testdata/no.star",
	} {
		if _, err := Load(l, []string{ref}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", ref, err, want)
		}
	}
	if err := Write(&bytes.Buffer{}, nil, "yaml"); err == nil || !strings.Contains(err.Error(), `unknown format "yaml" (want text, markdown, json)`) {
		t.Errorf("format: %v", err)
	}
}
