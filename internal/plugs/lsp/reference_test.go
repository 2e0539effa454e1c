package lsp

import (
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/interp"
)

// TestReferenceDocumentsEveryName keeps the user documentation
// and the language server one source: every predeclared name, every
// member of a predeclared module but time's, and every attribute of the
// values handlers receive must be documented in docs/*.md in a form the
// server reads, so hover and completion never come without text.
func TestReferenceDocumentsEveryName(t *testing.T) {
	m, err := newModel((&interp.Loader{Predeclared: builtins.Predeclared}).FilePredeclared())
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string{"load"}, m.config...)
	for _, g := range m.globals {
		if g != "PLUG_API_VERSION" {
			names = append(names, g)
		}
	}
	for _, n := range names {
		if e := m.ref[n]; e == nil || e.Doc == "" {
			t.Errorf("predeclared %s: no documentation: give it a heading with `%s` in one of %v (see readReference)", n, n, referenceDocs)
		}
	}
	for typeName, v := range m.values {
		if typeName == "time" {
			continue // go.starlark.net's module, described as a whole
		}
		for _, a := range v.AttrNames() {
			if e := m.doc(typ{name: typeName}, a); e == nil || e.Doc == "" {
				t.Errorf("%s.%s: no documentation: give it a table row starting with `%s.%s` in one of %v (see readReference)", typeName, a, typeName, a, referenceDocs)
			}
		}
	}
}

// TestReferenceReadsTheFormsOfTheDocs: the forms the documents
// keep to, and rows that are about something else.
func TestReferenceReadsTheFormsOfTheDocs(t *testing.T) {
	md := "## The context: `ctx`\n\nEvery handler gets a `ctx`.\n\n" +
		"| field | what |\n| --- | --- |\n| `ctx.state` | per-run state |\n\n" +
		"- `ctx.persisted.value`: the stored value.\n\n" +
		"### `next()` never fails\n\nIt returns a **PauseInfo**:\n\n" +
		"| attribute | value |\n| --- | --- |\n| `reason` | why |\n\n" +
		"## `plug(...)`\n\n| mistake | error |\n| --- | --- |\n| no `plug(...)` call | not a plug |\n" +
		"\n| call | returns |\n| --- | --- |\n| `plug(name)` | declares |\n"
	ref := reference{}
	ref.read([]byte(md))
	for name, doc := range map[string]string{
		"ctx":                 "Every handler gets a `ctx`.",
		"ctx.state":           "per-run state",
		"ctx.persisted.value": "the stored value.",
		"PauseInfo.reason":    "why",
		"plug":                "declares",
	} {
		if e := ref[name]; e == nil || e.Doc != doc {
			t.Errorf("%s: %+v, want doc %q", name, e, doc)
		}
	}
}

// TestHoverTextsLinkNowhereAnEditorCannotGo: the docs' links to their
// own places ("[above](#x)", "[messages.md](messages.md#fail)") keep only
// their text in hover and completion, where an editor cannot follow them;
// links to the web stay.
func TestHoverTextsLinkNowhereAnEditorCannotGo(t *testing.T) {
	for in, want := range map[string]string{
		"see [above](#ctxagent-is-writable) and [messages.md](messages.md#fail).": "see above and messages.md.",
		"a[0] is [`ctx`](#ctx)":                       "a[0] is `ctx`",
		"see [`a[0]`](#x)":                            "see `a[0]`",
		"the [spec](https://agentclientprotocol.com)": "the [spec](https://agentclientprotocol.com)",
		"no link ](here":                              "no link ](here",
	} {
		if got := withoutLocalLinks(in); got != want {
			t.Errorf("withoutLocalLinks(%q) = %q, want %q", in, got, want)
		}
	}
	m, err := newModel((&interp.Loader{Predeclared: builtins.Predeclared}).FilePredeclared())
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range m.ref {
		for _, part := range strings.Split(e.Doc, "](")[1:] {
			if !strings.HasPrefix(part, "http://") && !strings.HasPrefix(part, "https://") {
				t.Errorf("%s: a link into the docs left in %q", name, e.Doc)
			}
		}
	}
}
