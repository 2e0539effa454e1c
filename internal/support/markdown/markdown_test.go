package markdown

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestHTMLOfWhatAgentsWrite(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"heading and inlines", "# H *e* **s** `c` [l](http://x \"t\") ![i](y.png) <http://a.b> <a@b.c> &amp; a&lt;b\n",
			`<h1>H <em>e</em> <strong>s</strong> <code>c</code> <a href="http://x" title="t">l</a> <img src="y.png" alt="i"> <a href="http://a.b">http://a.b</a> <a href="mailto:a@b.c">a@b.c</a> &amp; a&lt;b</h1>` + "\n"},
		{"setext headings", "Title\n=====\n\nSub\n---\n", "<h1>Title</h1>\n<h2>Sub</h2>\n"},
		{"tight list, nested", "- one\n- two\n  - deep\n- three\n",
			"<ul>\n<li>one</li>\n<li>two\n<ul>\n<li>deep</li>\n</ul>\n</li>\n<li>three</li>\n</ul>\n"},
		{"loose ordered list", "3. a\n\n   b\n4. c\n",
			"<ol start=\"3\">\n<li>\n<p>a</p>\n<p>b</p>\n</li>\n<li>\n<p>c</p>\n</li>\n</ol>\n"},
		{"a blank line between items loosens the list", "- a\n\n- b\n", "<ul>\n<li>\n<p>a</p>\n</li>\n<li>\n<p>b</p>\n</li>\n</ul>\n"},
		{"lazy lines", "> quoted\nstill quoted\n\n- item\ncontinued\n",
			"<blockquote>\n<p>quoted\nstill quoted</p>\n</blockquote>\n<ul>\n<li>item\ncontinued</li>\n</ul>\n"},
		{"code", "```go\nx<y\n\n```\n\n    indented\n", "<pre><code class=\"language-go\">x&lt;y\n\n</code></pre>\n<pre><code>indented\n</code></pre>\n"},
		{"code keeps its tabs", "```go\nfunc f() {\n\treturn\n}\n```\n\n- item\n\n  ```\n  \tx\n  ```\n",
			"<pre><code class=\"language-go\">func f() {\n\treturn\n}\n</code></pre>\n<ul>\n<li>\n<p>item</p>\n<pre><code>\tx\n</code></pre>\n</li>\n</ul>\n"},
		{"an unclosed fence runs to the end", "```\na\n", "<pre><code>a\n</code></pre>\n"},
		{"rule and breaks", "---\n\nline  \nbreak\\\nand\nsoft\n", "<hr>\n<p>line<br>\nbreak<br>\nand\nsoft</p>\n"},
		{"emphasis rules", "*a **b** c* __d__ snake_case_name 2*3*4 ***both***",
			"<p><em>a <strong>b</strong> c</em> <strong>d</strong> snake_case_name 2<em>3</em>4 <em><strong>both</strong></em></p>\n"},
		{"escapes and entities", "\\*not\\* &copy; &#65; &#x42; &nope; `\\*raw\\*`", "<p>*not* © A B &amp;nope; <code>\\*raw\\*</code></p>\n"},
		{"code spans", "`` a ` b `` and ``` unmatched", "<p><code>a ` b</code> and ``` unmatched</p>\n"},
		{"link forms", "[a](</with space>) [b](u(v)w) [c](u 'q') [not a link] [x]( ",
			`<p><a href="/with%20space">a</a> <a href="u(v)w">b</a> <a href="u" title="q">c</a> [not a link] [x](</p>` + "\n"},
		{"reference links", "[full][r] [r][] [R]\n\n[r]: /ref \"T\"\n",
			`<p><a href="/ref" title="T">full</a> <a href="/ref" title="T">r</a> <a href="/ref" title="T">R</a></p>` + "\n"},
		{"no link in a link", "[a [b](c) d](e)", `<p>[a <a href="c">b</a> d](e)</p>` + "\n"},
		{"tables are text (the terminal draws them)", "| a | b |\n|---|---|\n| 1 | 2 |\n", "<p>| a | b |\n|---|---|\n| 1 | 2 |</p>\n"},
		{"empty", " \n\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := HTML(c.src); got != c.want {
				t.Errorf("HTML(%q)\n got %q\nwant %q", c.src, got, c.want)
			}
		})
	}
}

func TestHTMLIsInert(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"an HTML block", "<script>\nalert(1)\n</script>\n", "<!-- raw HTML omitted -->\n"},
		{"a tag alone on its line", "<img src=x onerror=alert(1)>\n", "<!-- raw HTML omitted -->\n"},
		{"inline tags", "a <b onclick=\"x()\">b</b> <!-- c -->", "<p>a <!-- raw HTML omitted -->b<!-- raw HTML omitted --> <!-- raw HTML omitted --></p>\n"},
		{"not a tag", "a < b > c", "<p>a &lt; b &gt; c</p>\n"},
		{"script links", "[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](vbscript:x) [f](file:///etc/passwd) <javascript:alert(1)>",
			`<p><a href="">x</a> <a href="">y</a> <a href="">z</a> <a href="">f</a> <a href="">javascript:alert(1)</a></p>` + "\n"},
		{"what a browser skips before a scheme", "[a](<\x01 java\tscript:alert(1)>) [b](&#x6A;avascript:alert(1)) [c](javascript&colon;alert(1))",
			`<p><a href="">a</a> <a href="">b</a> <a href="">c</a></p>` + "\n"},
		{"data: only for images", "[d](data:text/html;base64,PHNjcmlwdD4=) ![i](data:image/png;base64,AA)",
			`<p><a href="">d</a> <img src="data:image/png;base64,AA" alt="i"></p>` + "\n"},
		{"quotes stay in their attribute", "[x](/a\"onmouseover=\"b) ![a\"b](c \"t\\\"q\")",
			`<p><a href="/a%22onmouseover=%22b">x</a> <img src="c" alt="a&quot;b" title="t&quot;q"></p>` + "\n"},
		{"a code block's info string", "```\"><script>\nx\n```\n", "<pre><code class=\"language-&quot;&gt;&lt;script&gt;\">x\n</code></pre>\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := HTML(c.src); got != c.want {
				t.Errorf("HTML(%q)\n got %q\nwant %q", c.src, got, c.want)
			}
		})
	}
}

// ourTag matches what HTML writes itself: every '<' of its output starts one.
var ourTag = regexp.MustCompile(`^<(/?(p|h[1-6]|hr|pre|code|blockquote|ul|ol|li|em|strong|br|a)|!-- raw HTML omitted --|a href="[^"<>]*"( title="[^"<>]*")?|img src="[^"<>]*" alt="[^"<>]*"( title="[^"<>]*")?|ol start="[0-9]+"|code class="language-[^"<>]*")>`)

func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		"# a\n\n- b\n  1. c\n\n> d\n\n```\ne\n```\n", "[x](y) **z** _w_ <b>v</b> <http://u>",
		"[r]\n\n[r]: /u 't'", "***a**b*c_d_", "- a\n\n  b\n- c\n  > d\ne", "<!-- a\n\nb -->\n<?x?>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := HTML(src)
		for i := 0; i < len(out); i++ {
			if out[i] == '<' && !ourTag.MatchString(out[i:]) {
				t.Fatalf("HTML(%q) wrote markup of its input at %d: %q", src, i, out[i:min(len(out), i+40)])
			}
		}
		if strings.Contains(strings.ToLower(out), `href="javascript`) || strings.Contains(strings.ToLower(out), `src="javascript`) {
			t.Fatalf("HTML(%q) linked a script: %q", src, out)
		}
	})
}

// The parse takes time in proportion to its text, whatever the text: an
// agent's message may be made to be slow to render. Each case runs at two
// lengths, four times apart: their MB/s are about the same.
func BenchmarkHTML(b *testing.B) {
	for _, c := range []struct {
		name string
		gen  func(n int) string
	}{
		{"document", func(n int) string {
			return strings.Repeat("# Heading\n\nSome *text* with `code` and a [link](http://x).\n\n- a\n- b\n\n```\ncode\n```\n\n", n/50)
		}},
		{"unclosed-code-spans", func(n int) string { return strings.Repeat("`` a ", n) }},
		{"unclosed-comments", func(n int) string { return strings.Repeat("<!-- a ", n) }},
		{"unclosed-quotes", func(n int) string { return strings.Repeat("<a b=\"c ", n) }},
		{"autolinks", func(n int) string { return strings.Repeat("<aaaa:", n) }},
		{"brackets-and-stars", func(n int) string { return strings.Repeat("*[", n) + strings.Repeat("]", n) }},
		{"link-tails", func(n int) string { return strings.Repeat("[a](b 'c ", n) }},
		{"lazy-lines", func(n int) string { return "- a\n" + strings.Repeat("  b\nc\n", n) }},
		{"loose-item", func(n int) string { return "- a\n" + strings.Repeat("\n  b\n", n) }},
		{"nested-lists", func(n int) string { return strings.Repeat("- ", n) + "a" }},
	} {
		for _, n := range []int{4000, 16000} {
			src := c.gen(n)
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					HTML(src)
				}
			})
		}
	}
}
