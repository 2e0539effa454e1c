package browsertest

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The accessibility check finds what it is for: a button without a name
// and an image without a text are critical violations; a page without
// them has none.
func TestAccessibilityCheckFindsViolations(t *testing.T) {
	script := axeScript()
	if script == "" {
		t.Skip("axe-core is not installed: npm ci --prefix testdata/axe-core")
	}
	tab := New(t)
	const good = `<!doctype html><html lang="en"><head><title>t</title></head><body><main><h1>Fine</h1><button>Send</button></main></body></html>`
	const bad = `<!doctype html><html lang="en"><head><title>t</title></head><body><main><h1>Not fine</h1><button></button><img src="x.png"></main></body></html>`
	for _, c := range []struct {
		page string
		want []string
	}{{good, nil}, {bad, []string{"critical button-name", "critical image-alt"}}} {
		if _, err := chromedp.Run(tab, chromedp.Navigate("data:text/html,"+c.page)); err != nil {
			t.Fatal(err)
		}
		found, err := violations(tab, script)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(found, "\n")
		if len(found) != len(c.want) {
			t.Errorf("%d violations, want %d:\n%s", len(found), len(c.want), got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("no %q in:\n%s", w, got)
			}
		}
	}
}
