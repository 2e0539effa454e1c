package termmd

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func TestMarkdownBlocksRenderPlainly(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"heading and emphasis", "# Title\n\nSome **bold** and *it* and `code` and ~~kept~~.\n",
			"Title\n\nSome bold and it and code and ~~kept~~.\n"},
		{"escapes and entities", "a \\*star\\* &amp; &#65; `\\*raw\\*`\n", "a *star* & A \\*raw\\*\n"},
		{"tight list, nested", "- one\n- two\n  - deep\n- three\n", "• one\n• two\n  • deep\n• three\n"},
		{"ordered list, loose", "9. nine\n\n10. ten\n", "9.  nine\n\n10. ten\n"},
		{"quote", "> said\n>\n> more\n", "│ said\n│\n│ more\n"},
		{"fenced code keeps its lines", "```go\nfunc f() {\n\n\treturn\n}\n```\n", "  func f() {\n\n      return\n  }\n"},
		{"link with its address", "see [the docs](https://x.example/d) or <https://y.example>\n",
			"see the docs (https://x.example/d) or https://y.example\n"},
		{"link that is its address", "[https://x.example](https://x.example)\n", "https://x.example\n"},
		{"rule", "a\n\n---\n\nb\n", "a\n\n" + strings.Repeat("─", 40) + "\n\nb\n"},
		{"table aligned", "| name | n |\n|:--|--:|\n| a | 10 |\n| bcd | 2 |\n",
			"name │  n\n─────┼───\na    │ 10\nbcd  │  2\n"},
		{"table in text, ragged rows, pipes escaped", "before\n\n| a | `x\\|y` |\n| --- | :-: |\n| 1 \\| 2 |\n| 3 | 4 | 5 |\na row\n\nafter\n",
			"before\n\na     │ x|y\n──────┼────\n1 | 2 │\n3     │  4\na row │\n\nafter\n"},
		{"not a table: delimiter cells differ", "| a | b |\n| - |\n", "| a | b | | - |\n"},
		{"no table in a fence", "```\n| a |\n| - |\n```\n", "  | a |\n  | - |\n"},
		{"hard break", "one  \ntwo\nthree\n", "one\ntwo three\n"},
		{"raw html stays", "<div>\nhi\n</div>\n", "<div>\nhi\n</div>\n"},
		{"empty", "   \n\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := New(60, Plain).Render(c.src)
			if got != c.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", c.src, got, c.want)
			}
		})
	}
}

func TestMarkdownWrapsToTheWidthAndKeepsLongWordsWhole(t *testing.T) {
	src := "alpha beta gamma delta epsilon zeta eta theta iota kappa " + strings.Repeat("x", 30) + "\n\n- " +
		strings.Repeat("word ", 10) + "\n"
	got := New(20, Plain).Render(src)
	for l := range strings.Lines(got) {
		l = strings.TrimSuffix(l, "\n")
		if ansi.StringWidth(l) > 20 && !strings.Contains(l, strings.Repeat("x", 30)) {
			t.Errorf("line wider than 20: %q", l)
		}
		if strings.HasSuffix(l, " ") {
			t.Errorf("line ends in a space: %q", l)
		}
	}
	if !strings.Contains(got, "\n  word") {
		t.Errorf("a list item's second line is not under its text: %q", got)
	}
}

func TestMarkdownStylesNestAndEndTheirOwn(t *testing.T) {
	got := New(80, Dark).Render("# H\n\n***both*** `c` [l](u)\n")
	for _, want := range []string{
		"\x1b[" + Dark.Heading + "mH\x1b[0m",
		"\x1b[3m\x1b[1mboth\x1b[22m\x1b[23m",
		"\x1b[" + Dark.Code + "mc\x1b[0m",
		"\x1b[" + Dark.Link + "ml\x1b[0m \x1b[" + Dark.URL + "m(u)\x1b[0m",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	if plain := New(80, Plain).Render("# H\n\n***both*** `c` [l](u)\n"); strings.Contains(plain, "\x1b") {
		t.Errorf("the plain style wrote a sequence: %q", plain)
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"# a\n\n- b\n  1. c\n\n> d\n\n```\ne\n```\n", "| a | b |\n|-|-|\n| c |\n", "[x](y) **z** ~~w~~ <b>v</b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if out := New(30, Plain).Render(src); strings.Contains(out, "\x1b") && !strings.Contains(src, "\x1b") {
			t.Errorf("the plain style wrote a sequence for %q: %q", src, out)
		}
		New(30, Dark).Render(src)
	})
}
