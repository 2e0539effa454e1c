package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// axeScript is axe-core as testdata/axe-core pins it, read once; empty
// when it is not installed.
var axeScript = sync.OnceValue(func() string {
	_, file, _, _ := runtime.Caller(0)
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "axe-core", "node_modules", "axe-core", "axe.min.js"))
	return string(b)
})

// axeRun runs axe-core's default rules (WCAG 2 A and AA, and its best
// practices) on the page and returns its serious and critical violations,
// one line each with the elements they are found on.
const axeRun = `axe.run(document).then(r => r.violations
	.filter(v => v.impact === "serious" || v.impact === "critical")
	.map(v => v.impact + " " + v.id + ": " + v.help + "\n\t" + v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replaceAll("\n", " ")).join("\n\t")))`

// Accessible checks the page the tab shows with axe-core, injected
// through the DevTools protocol (the page's CSP is not in its way), and
// fails the test on a serious or critical violation. Without axe-core
// (`npm ci --prefix testdata/axe-core`) it says so and checks nothing;
// under CI=true it fails instead.
func Accessible(t *testing.T, tab context.Context, page string) {
	t.Helper()
	script := axeScript()
	if script == "" {
		const why = "axe-core is not installed: npm ci --prefix testdata/axe-core runs the dashboard's accessibility checks"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Log(why + "; " + page + " is not checked")
		return
	}
	found, err := violations(tab, script)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(found) > 0 {
		t.Errorf("%s: axe-core finds %d serious or critical accessibility violations:\n%s", page, len(found), strings.Join(found, "\n"))
	}
}

// violations injects axe-core into the page and returns its serious and
// critical violations.
func violations(tab context.Context, script string) ([]string, error) {
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](`if (!window.axe) {`+script+`}`)); err != nil {
		return nil, fmt.Errorf("injecting axe-core: %w", err)
	}
	found, err := chromedp.Run(tab, chromedp.Evaluate[[]string](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("running axe-core: %w", err)
	}
	return found, nil
}
